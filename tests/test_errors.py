"""Errors teach: each is typed and names the tensor, node, shape or rule at fault."""

from __future__ import annotations

import numpy as np
import pytest

import minigraph as mg
from minigraph.graph import Graph
from minigraph.ops import apply


def small_graph() -> Graph:
    with mg.name_scope():
        x = mg.input("x", (4, 3))
        W = mg.param("W", (3, 2))
        return Graph([mg.relu(x @ W)])


def good_feeds() -> dict[str, np.ndarray]:
    return {"x": np.ones((4, 3), np.float32), "W": np.ones((3, 2), np.float32)}


# --- building ----------------------------------------------------------------------------------

def test_shape_mismatch_names_both_operands_and_the_rule() -> None:
    x = mg.input("x", (64, 256))
    W = mg.param("W", (128, 10))
    with pytest.raises(mg.ShapeError) as e:
        x @ W
    msg = str(e.value)
    assert "matmul" in msg and "x[64,256]" in msg and "W[128,10]" in msg
    assert "256 != 128" in msg


def test_broadcast_mismatch_names_both_shapes() -> None:
    a, b = mg.input("a", (4, 3)), mg.input("b", (5,))
    with pytest.raises(mg.ShapeError, match=r"add\(a\[4,3\], b\[5\]\)"):
        a + b


def test_dtype_mismatch_names_both_tensors_and_dtypes() -> None:
    a = mg.input("a", (4,), dtype="float32")
    b = mg.input("b", (4,), dtype="float64")
    with pytest.raises(mg.DTypeError) as e:
        a * b
    msg = str(e.value)
    assert "a[float32]" in msg and "b[float64]" in msg


def test_unknown_op_names_the_op_and_lists_known_ones() -> None:
    x = mg.input("x", (2,))
    with pytest.raises(mg.UnknownOpError) as e:
        apply("frobnicate", [x])
    msg = str(e.value)
    assert "'frobnicate'" in msg and "relu" in msg
    assert not msg.startswith('"')          # readable, not a KeyError repr


def test_symbolic_tensor_has_no_truth_value() -> None:
    x = mg.input("x", (2,))
    with pytest.raises(TypeError, match="x is symbolic"):
        bool(x)


# --- gradients -----------------------------------------------------------------------------------

def test_gradient_of_a_non_scalar_names_the_tensor_and_its_size() -> None:
    with mg.name_scope():
        x = mg.input("x", (4, 3))
        W = mg.param("W", (3, 2))
        y = mg.relu(x @ W)
    with pytest.raises(mg.GradError) as e:
        mg.grad(y, [W])
    msg = str(e.value)
    assert y.name in msg and "[4,2]" in msg and "8 elements" in msg and "mg.mean" in msg


def test_gradient_with_respect_to_an_integer_tensor_is_refused() -> None:
    ids = mg.input("ids", (4,), dtype="int64")
    W = mg.param("W", (4,))
    loss = mg.sum(W)
    with pytest.raises(mg.GradError, match="ids has dtype int64"):
        mg.grad(loss, [ids])


def test_gradient_of_a_loss_that_does_not_depend_on_the_parameter() -> None:
    x = mg.input("x", (3,))
    W = mg.param("W_unused", (3,))
    loss = mg.sum(mg.exp(x))
    with pytest.raises(mg.GradError, match="does not depend on W_unused"):
        mg.grad(loss, [W])


# --- editing: cycles -----------------------------------------------------------------------------

def test_rewire_into_a_loop_raises_cycle_error_naming_the_nodes() -> None:
    with mg.name_scope():
        x = mg.input("x", (4,))
        a = mg.exp(x)          # node exp_0
        b = mg.tanh(a)         # node tanh_0
        c = mg.sigmoid(b)      # node sigmoid_0
        g = Graph([c])
    with pytest.raises(mg.CycleError) as e:
        g.rewire(a.name, 0, c.name)      # exp_0 would read sigmoid_0's output
    msg = str(e.value)
    for node in ("exp_0", "tanh_0", "sigmoid_0"):
        assert node in msg
    assert "cycle" in msg


def test_rewire_with_a_tensor_of_another_shape_is_a_shape_error() -> None:
    with mg.name_scope():
        x = mg.input("x", (4,))
        z = mg.input("z", (5,))
        a = mg.exp(x)
        g = Graph([a, mg.exp(z)])
    with pytest.raises(mg.ShapeError, match=r"rewire exp_0.*x\[4\].*z\[5\]"):
        g.rewire("exp_0", 0, "z")


# --- feeding the executor ----------------------------------------------------------------------

def test_wrong_dtype_feed_names_the_feed_and_both_dtypes() -> None:
    ex = mg.Executor(small_graph(), device="cpu")
    feeds = good_feeds()
    feeds["x"] = feeds["x"].astype(np.float64)
    with pytest.raises(mg.FeedError) as e:
        ex.run(feeds)
    msg = str(e.value)
    assert "'x'" in msg and "float32" in msg and "float64" in msg


def test_wrong_shape_feed_names_the_feed_and_both_shapes() -> None:
    ex = mg.Executor(small_graph(), device="cpu")
    feeds = good_feeds()
    feeds["W"] = np.ones((2, 3), np.float32)
    with pytest.raises(mg.FeedError, match=r"'W'.*\[3, 2\].*\[2, 3\]"):
        ex.run(feeds)


def test_unknown_feed_names_it_and_what_the_graph_takes() -> None:
    ex = mg.Executor(small_graph(), device="cpu")
    with pytest.raises(mg.FeedError) as e:
        ex.run({**good_feeds(), "y": np.ones(3, np.float32)})
    msg = str(e.value)
    assert "'y'" in msg and "W" in msg and "x" in msg


def test_missing_feed_names_it_with_its_shape() -> None:
    ex = mg.Executor(small_graph(), device="cpu")
    with pytest.raises(mg.FeedError) as e:
        ex.run({"x": np.ones((4, 3), np.float32)})
    msg = str(e.value)
    assert "'W'" in msg and "W[3,2]" in msg and "mg.init_params" in msg


def test_errors_are_minigraph_errors_and_standard_ones() -> None:
    assert issubclass(mg.ShapeError, ValueError) and issubclass(mg.ShapeError, mg.MinigraphError)
    assert issubclass(mg.CycleError, mg.GraphError)
    assert issubclass(mg.UnknownOpError, KeyError)
    assert issubclass(mg.FeedError, mg.MinigraphError)

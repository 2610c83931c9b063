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


# --- issue 15: declarations ------------------------------------------------------------------

def test_a_negative_dimension_is_refused_when_declared() -> None:
    with pytest.raises(mg.ShapeError, match=r"q: dimension -2 of shape \[-2, 3\] is negative"):
        mg.input("q", (-2, 3))
    with pytest.raises(mg.ShapeError, match="not an int"):
        mg.param("p", (2.5, 3))


def test_a_tensor_whose_bytes_overflow_int64_is_refused_when_declared() -> None:
    with pytest.raises(mg.ShapeError, match=r"q\[4294967296, 4294967296\].*int64"):
        mg.input("q", (2**32, 2**32))                 # 2**64 elements: np.prod wraps to 0
    with pytest.raises(mg.ShapeError, match="int64"):
        mg.input("r", (2**31, 2**31), "float64")      # 2**62 elements, 2**65 bytes
    assert mg.input("s", (2**20, 2**20)).size == 2**40   # large but representable: fine


def test_reshape_to_minus_one_keeps_every_element() -> None:
    q = mg.input("q", (2**20, 2**20))
    assert mg.reshape(q, (-1,)).shape == (2**40,)
    with pytest.raises(mg.ShapeError, match="negative dimension"):
        mg.reshape(mg.input("x", (3, 4)), (-2, -6))   # product 12, but no such shape


def test_an_unknown_dtype_is_a_dtype_error_naming_it() -> None:
    with pytest.raises(mg.DTypeError, match="q: unknown dtype 'float33'"):
        mg.input("q", (2,), dtype="float33")
    with pytest.raises(mg.DTypeError, match="not numeric"):
        mg.param("p", (2,), dtype="U5")


# --- issue 15: from_nodes refuses malformed plain data ------------------------------------------

def _x() -> dict[str, mg.TensorInfo]:
    return {"x": mg.TensorInfo("x", (2,), "float32", "input"),
            "a": mg.TensorInfo("a", (2,), "float32", "activation", producer="n1")}


def test_from_nodes_refuses_two_nodes_writing_one_tensor() -> None:
    nodes = [mg.Node("n1", "relu", (), ("x",), ("a",)), mg.Node("n2", "exp", (), ("x",), ("a",))]
    with pytest.raises(mg.GraphError, match="tensor 'a' is written by two nodes, n1 and n2"):
        Graph.from_nodes(nodes, _x(), ["a"])


def test_from_nodes_refuses_an_activation_nothing_produces() -> None:
    tensors = {**_x(), "b": mg.TensorInfo("b", (2,), "float32", "activation")}
    nodes = [mg.Node("n1", "add", (), ("x", "b"), ("a",))]
    with pytest.raises(mg.GraphError, match="activation 'b' has no producer"):
        Graph.from_nodes(nodes, tensors, ["a"])


def test_from_nodes_refuses_an_unknown_producer() -> None:
    tensors = {**_x(), "b": mg.TensorInfo("b", (2,), "float32", "activation", producer="zz")}
    nodes = [mg.Node("n1", "relu", (), ("x",), ("a",))]
    with pytest.raises(mg.GraphError, match="tensor 'b' names producer 'zz', but no node"):
        Graph.from_nodes(nodes, tensors, ["a"])      # was a bare KeyError from liveness


def test_from_nodes_refuses_a_negative_shape() -> None:
    tensors = {**_x(), "x": mg.TensorInfo("x", (-2,), "float32", "input")}
    with pytest.raises(mg.ShapeError, match="x: dimension -2"):
        Graph.from_nodes([mg.Node("n1", "relu", (), ("x",), ("a",))], tensors, ["a"])


# --- issue 15: feeds ------------------------------------------------------------------------

def test_ragged_feed_lists_are_a_feed_error_naming_the_feed() -> None:
    ex = mg.Executor(small_graph(), device="cpu")
    with pytest.raises(mg.FeedError, match=r"feed 'x': not an array .*\[4, 3\] float32"):
        ex.run({"x": [[1.0, 2.0, 3.0], [1.0]], "W": good_feeds()["W"]})


def test_executor_given_a_dict_for_a_plan_names_what_it_got() -> None:
    with pytest.raises(mg.MinigraphError, match=r"not dict \{'a': 0\}") as e:
        mg.Executor(small_graph(), {"a": 0})
    assert isinstance(e.value, TypeError) and isinstance(e.value, mg.PlanError)


# --- issue 15: tensors that cannot be allocated --------------------------------------------------

def _huge_graph() -> Graph:
    """1e6 floats in, a 1e6 x 1e6 activation (4 TB) in the middle."""
    with mg.name_scope():
        x = mg.input("x", (10**6,))
        big = mg.broadcast_to(mg.reshape(x, (1, 10**6)), (10**6, 10**6))
        return Graph([mg.sum(mg.relu(big))])


def test_a_run_that_cannot_be_allocated_is_refused_before_allocating() -> None:
    g, feeds = _huge_graph(), {"x": np.zeros(10**6, np.float32)}
    for ex in (mg.Executor(g, device="cpu"), mg.Executor(g, mg.plan_memory(g), device="cpu")):
        with pytest.raises(mg.AllocationError, match=r"broadcast_to_0.*4,000,000,000,000 bytes"):
            ex.run(feeds)
        with pytest.raises(MemoryError):
            ex.load(feeds)


def test_dtr_refuses_a_run_that_cannot_be_allocated() -> None:
    from minigraph.runtime.dtr import DTRExecutor
    ex = DTRExecutor(_huge_graph(), 9 * 10**12, device="cpu")
    with pytest.raises(mg.AllocationError, match=r"arena \(the budget\): 9,000,000,000,000"):
        ex.run({"x": np.zeros(10**6, np.float32)})


def test_init_params_refuses_parameters_that_cannot_be_allocated() -> None:
    g = Graph([mg.sum(mg.param("W", (10**6, 10**6)))])
    with pytest.raises(mg.AllocationError, match=r"W: 4,000,000,000,000 bytes"):
        mg.init_params(g)
    with pytest.raises(mg.AllocationError, match=r"W: 4,000,000,000,000 bytes"):
        mg.random_feeds(g)


def test_the_allocation_limit_counts_every_buffer_of_the_run(monkeypatch) -> None:
    import minigraph.feeds
    g = small_graph()                    # x 48 B, W 24 B, the output 32 B, relu's input 32 B
    monkeypatch.setattr(minigraph.feeds, "memory_limit", lambda device: 135)
    with pytest.raises(mg.AllocationError, match="need 136 bytes"):
        mg.Executor(g, device="cpu").run(good_feeds())
    monkeypatch.setattr(minigraph.feeds, "memory_limit", lambda device: 136)
    mg.Executor(g, device="cpu").run(good_feeds())


def test_a_ragged_constant_is_a_graph_error_naming_it() -> None:
    with pytest.raises(mg.GraphError, match="constant c: the value is not an array"):
        mg.constant([[1.0], [1.0, 2.0]], name="c")

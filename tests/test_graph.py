"""The graph as a value, and the explicit backward graph's promises [Chen 2016].

- a frozen graph cannot be changed; editing returns a new graph;
- names are stable: the same builder in a fresh name_scope gives the same names;
- a tensor with several consumers gets ONE add_n aggregation node, and no split node;
- backward nodes read only the forward tensors their rule needs (relu_grad reads relu's
  output, not its input), so some forward tensors die with the forward pass.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import minigraph as mg
from minigraph.graph import Graph, Node


def mlp_step(lr: float = 0.1) -> Graph:
    with mg.name_scope():
        x = mg.input("x", (8, 5))
        W1 = mg.param("W1", (5, 6))
        W2 = mg.param("W2", (6, 3))
        h = mg.relu(x @ W1)
        loss = mg.mean(h @ W2)
        return mg.training_graph(loss, [W1, W2], lr=lr)


# --- the graph as an immutable value -----------------------------------------------------------

def test_graph_is_immutable() -> None:
    g = mlp_step()
    with pytest.raises(TypeError):
        g.tensors["x"] = g.tensors["W1"]          # a read-only mapping
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.nodes[0].op = "exp"                      # nodes are frozen records
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.tensors["x"].shape = (1, 1)
    with pytest.raises(TypeError):
        g.consumers["x"] = ()
    assert isinstance(g.nodes, tuple)


def test_rewire_returns_a_new_graph_and_leaves_the_old_one_alone() -> None:
    with mg.name_scope():
        x = mg.input("x", (4,))
        a = mg.exp(x)
        b = mg.tanh(a)
        c = mg.sigmoid(b)
        g = Graph([c])
    sig = g.node(c.name)
    g2 = g.rewire(sig.name, 0, a.name)
    assert g.node(sig.name).inputs == (b.name,)
    assert g2.node(sig.name).inputs == (a.name,)
    assert g2 is not g


def test_len_and_iteration_follow_program_order() -> None:
    g = mlp_step()
    assert len(g) == len(g.nodes)
    assert [n.name for n in g] == [n.name for n in g.nodes]
    pos = {n.name: k for k, n in enumerate(g)}
    for n in g:
        for i in n.inputs:
            p = g.tensors[i].producer
            assert p is None or pos[p] < pos[n.name]
        for d in n.deps:
            assert pos[d] < pos[n.name]


def test_summary_counts_nodes_by_role_and_lists_outputs() -> None:
    g = mlp_step()
    s = g.summary()
    roles = {r: sum(n.role == r for n in g) for r in ("forward", "backward", "update")}
    assert f"{len(g)} nodes" in s
    for r, k in roles.items():
        assert f"{k} {r}" in s
    assert f"{len(g.tensors)} tensors" in s
    assert "W1_new" in s and "W2_new" in s
    assert str(g) == s
    assert repr(g).startswith("<Graph")


def test_names_are_stable_in_a_fresh_name_scope() -> None:
    g1, g2 = mlp_step(), mlp_step()
    assert [(n.name, n.op, n.inputs, n.outputs) for n in g1] == \
           [(n.name, n.op, n.inputs, n.outputs) for n in g2]
    assert list(g1.tensors) == list(g2.tensors)


def test_duplicate_tensor_names_are_rejected() -> None:
    a, b = mg.input("x", (2,)), mg.input("x", (2,))
    with pytest.raises(mg.GraphError, match="'x'"):
        Graph([mg.add(a, b)])


# --- node roles and tensor kinds -----------------------------------------------------------------

def test_every_node_has_a_role_and_every_tensor_a_kind_that_matches_it() -> None:
    g = mlp_step()
    kind_of_role = {"forward": "activation", "backward": "gradient", "update": "updated"}
    seen = set()
    for n in g:
        seen.add(n.role)
        for o in n.outputs:
            assert g.tensors[o].kind == kind_of_role[n.role], (n.name, o)
    assert seen == {"forward", "backward", "update"}
    assert {t.kind for t in g.leaves()} == {"input", "param", "const"}


def test_update_nodes_overwrite_their_parameter_after_every_other_reader() -> None:
    g = mlp_step()
    pos = {n.name: k for k, n in enumerate(g)}
    for p in ("W1", "W2"):
        upd = g.node(f"{p}_new")
        assert upd.role == "update" and upd.op == "sgd_update"
        assert g.tensors[f"{p}_new"].alias_of == p
        for reader in g.consumers[p]:
            if reader != upd.name:
                assert pos[reader] < pos[upd.name]


def test_forward_nodes_all_come_before_backward_nodes_in_program_order() -> None:
    g = mlp_step()
    roles = [n.role for n in g]
    last_fwd = max(k for k, r in enumerate(roles) if r == "forward")
    first_bwd = min(k for k, r in enumerate(roles) if r == "backward")
    assert last_fwd < first_bwd


# --- gradient aggregation: add_n, never a split layer [Chen 2016] -------------------------------

def test_a_tensor_with_two_consumers_gets_one_add_n_node_and_no_split() -> None:
    with mg.name_scope():
        x = mg.input("x", (4, 3))
        W = mg.param("W", (3, 3))
        h = x @ W
        y = mg.tanh(h) + mg.sigmoid(h)            # h has two consumers
        loss = mg.sum(y)
        g = mg.training_graph(loss, [W])
    # h is read by tanh and sigmoid; their gradient rules read their outputs, not h
    assert sorted(g.node(c).op for c in g.consumers[h.name]) == ["sigmoid", "tanh"]
    fwd_ops = sorted(n.op for n in g if n.role == "forward")
    assert fwd_ops == sorted(["matmul", "tanh", "sigmoid", "add", "sum"])   # no split node
    assert not any(n.op in ("split", "copy", "identity") for n in g)
    aggs = [n for n in g if n.op == "add_n"]
    assert len(aggs) == 1
    (agg,) = aggs
    assert agg.role == "backward"
    producers = sorted(g.tensors[i].producer for i in agg.inputs)
    assert [g.node(p).op for p in producers] == ["sigmoid_grad", "tanh_grad"]
    # the aggregated gradient of h flows into W's gradient matmul
    assert any(agg.outputs[0] in n.inputs and n.op == "matmul" for n in g)


def test_the_aggregated_gradient_is_the_sum_of_both_paths() -> None:
    with mg.name_scope():
        x = mg.input("x", (4, 3))
        W = mg.param("W", (3, 3))
        h = x @ W
        loss = mg.sum(mg.tanh(h) + mg.sigmoid(h))
        (dW,) = mg.grad(loss, [W])
        g = Graph([loss, dW])
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((4, 3)).astype(np.float32)
    Wv = rng.standard_normal((3, 3)).astype(np.float32)
    out = mg.Executor(g, device="cpu").run(x=xv, W=Wv)
    hv = xv @ Wv
    s = 1 / (1 + np.exp(-hv))
    dh = (1 - np.tanh(hv) ** 2) + s * (1 - s)
    np.testing.assert_allclose(out[dW.name], xv.T @ dh, rtol=1e-5, atol=1e-5)


# --- backward nodes reference only what they need -----------------------------------------------

def test_relu_grad_reads_the_relu_output_not_its_input() -> None:
    with mg.name_scope():
        x = mg.input("x", (4, 3))
        W = mg.param("W", (3, 2))
        a = x @ W                     # relu's input
        r = mg.relu(a)
        loss = mg.sum(r)
        g = mg.training_graph(loss, [W])
    (rg,) = [n for n in g if n.op == "relu_grad"]
    assert r.name in rg.inputs
    assert a.name not in rg.inputs
    # relu's input is read by relu alone: it can be freed as soon as relu has run
    assert g.consumers[a.name] == (g.tensors[r.name].producer,)


def test_mxnet_note_F_is_not_read_by_the_backward_pass_so_it_dies_with_the_forward() -> None:
    """The MXNet note [Chen 2016]: C = A * B, F = C + B, loss = mean(F). d(C) does not need F (nor
    C), so both can be freed right after the forward pass."""
    with mg.name_scope():
        A = mg.param("A", (16,))
        B = mg.param("B", (16,))
        C = A * B
        F = C + B
        loss = mg.mean(F)
        g = mg.training_graph(loss, [A, B])
    backward = [n for n in g if n.role != "forward"]
    for n in backward:
        assert C.name not in n.inputs and F.name not in n.inputs, n
    live = mg.liveness(g)
    last_forward = max(k for k, n in enumerate(g) if n.role == "forward")
    assert live.intervals[F.name].end <= last_forward
    assert live.intervals[C.name].end <= last_forward
    # ... while A and B (leaves) are read by the backward multiply
    assert any(A.name in n.inputs for n in backward)
    assert any(B.name in n.inputs for n in backward)


def test_no_gradient_is_computed_for_what_does_not_depend_on_the_parameters() -> None:
    with mg.name_scope():
        x = mg.input("x", (4, 3))
        W = mg.param("W", (3, 2))
        c = mg.exp(x)                 # does not depend on W
        loss = mg.sum(c @ W)
        g = mg.training_graph(loss, [W])
    backward = [n for n in g if n.role == "backward"]
    # exp's gradient rule (mul by its output) never runs; c is read only as matmul's operand
    assert not any(n.op == "mul" for n in backward)
    assert [g.node(r).op for r in g.consumers[c.name]] == ["matmul", "matmul"]
    assert sum(n.op == "matmul" for n in backward) == 1      # dW only, no dc


def test_from_nodes_sorts_topologically() -> None:
    g = mlp_step()
    shuffled = list(reversed(g.nodes))
    g2 = Graph.from_nodes(shuffled, dict(g.tensors), g.outputs)
    pos = {n.name: k for k, n in enumerate(g2)}
    for n in g2:
        for i in n.inputs:
            p = g2.tensors[i].producer
            assert p is None or pos[p] < pos[n.name]
    assert isinstance(g2.nodes[0], Node)

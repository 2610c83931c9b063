"""In-place: when an output may take its input's bytes ([Chen 2016]; [Huawei GE, blog §5.2]).

One test per clause of the rule in minigraph/memory/inplace.py, then the source articles' figures.
"""

from __future__ import annotations

import numpy as np
import pytest
from graphgen import bytes_equal

import minigraph as mg
from minigraph import examples
from minigraph.examples import named
from minigraph.feeds import random_feeds
from minigraph.memory import Buffer, inplace_pairs, validate_offsets

ONE = mg.MemoryOptions(inplace=True, planner="refcount", alignment=1)


def pairs_of(graph: mg.Graph) -> list[tuple[str, str]]:
    return inplace_pairs(graph, mg.liveness(graph, alignment=1))


def same_run(graph: mg.Graph, report: mg.MemoryReport) -> bool:
    feeds = random_feeds(graph)
    return bytes_equal(mg.Executor(graph).run(feeds), mg.Executor(graph, report.plan).run(feeds))


# --- the MXNet note [Chen 2016]: the sigmoid chain ------------------------------------------

def test_sigmoid_chain_needs_one_buffer_in_place():
    g = examples.sigmoid_chain(3, shape=(4, 8))          # B, C, D: 128 bytes each
    report = mg.plan_memory(g, ONE)
    assert report.plan.inplace == [("B", "C"), ("C", "D")]
    assert report.no_reuse_bytes == 3 * 128
    assert report.arena_bytes == 128                     # one buffer
    assert {report.plan.offsets[t] for t in "BCD"} == {0}
    assert same_run(g, report)


def test_sigmoid_chain_of_any_length_needs_one_buffer():
    for n, align in ((1, 1), (10, 1), (10, 512)):
        report = mg.plan_memory(examples.sigmoid_chain(n), ONE.replace(alignment=align))
        assert report.arena_bytes == max(128, align)


def test_sigmoid_chain_without_in_place_needs_two_buffers():
    # B [0,1], C [1,2], D [2,3]: B and D may share, C overlaps both.
    report = mg.plan_memory(examples.sigmoid_chain(3), ONE.replace(inplace=False))
    assert report.arena_bytes == 256
    assert report.plan.offsets["B"] == report.plan.offsets["D"] != report.plan.offsets["C"]


# --- the clauses of the rule -----------------------------------------------------------------

def test_inplace_refused_when_input_has_a_later_reader():
    # The MXNet note's counter-example [Chen 2016]: B is read by C = sigmoid(B) and, later, by F.
    g = examples.inplace_counterexample()
    pairs = pairs_of(g)
    assert ("B", "C") not in pairs
    assert ("B", "F") in pairs          # F is B's last reader: F may take B's bytes
    report = mg.plan_memory(g, ONE)
    assert report.plan.offsets["C"] != report.plan.offsets["B"]
    assert same_run(g, report)


def test_inplace_allowed_when_every_other_reader_ran_before():
    g = examples.inplace_counterexample(f_first=True)   # F runs before C
    assert ("B", "C") in pairs_of(g)


def test_inplace_refused_when_input_is_a_graph_input():
    assert ("A", "B") not in pairs_of(examples.sigmoid_chain())


def test_inplace_refused_when_input_is_a_parameter():
    with mg.name_scope():
        w = mg.param("W", (4, 4))
        g = mg.Graph([mg.sum(named(mg.relu(w), "r"))])
    assert pairs_of(g) == []


def test_inplace_refused_when_input_is_a_constant():
    with mg.name_scope():
        c = mg.constant(np.ones((4, 4), np.float32), name="c")
        g = mg.Graph([mg.sum(named(mg.relu(c), "r"))])
    assert pairs_of(g) == []


def test_inplace_refused_when_input_is_a_graph_output():
    with mg.name_scope():
        x = mg.input("x", (4, 4))
        a = named(mg.relu(x), "a")
        b = named(mg.sigmoid(a), "b")
        g = mg.Graph([a, mg.sum(b)])       # a is requested: its bytes must survive
    assert ("a", "b") not in pairs_of(g)


def test_inplace_refused_when_output_is_a_graph_output():
    with mg.name_scope():
        x = mg.input("x", (4, 4))
        a = named(mg.relu(x), "a")
        b = named(mg.sigmoid(a), "b")
        g = mg.Graph([b])                  # b has its own (unplanned) buffer
    assert pairs_of(g) == []


def test_inplace_refused_when_sizes_differ():
    with mg.name_scope():
        row = named(mg.relu(mg.input("r", (1, 8))), "row")      # 32 bytes
        full = named(mg.tanh(mg.input("f", (4, 8))), "full")     # 128 bytes
        s = named(mg.add(row, full), "s")                        # [4, 8]: 128 bytes
        g = mg.Graph([mg.sum(s)])
    pairs = pairs_of(g)
    assert ("row", "s") not in pairs        # a broadcast operand is smaller
    assert ("full", "s") in pairs           # add declares both operands; this one fits


def test_inplace_refused_when_the_op_is_not_inplace_capable():
    with mg.name_scope():
        a = named(mg.relu(mg.input("x", (4, 4))), "a")
        b = named(mg.matmul(a, mg.param("W", (4, 4))), "b")     # same size, but matmul
        g = mg.Graph([mg.sum(b)])
    assert ("a", "b") not in pairs_of(g)


def test_inplace_refused_when_input_is_read_twice_by_the_op():
    # add_n(a, a, a) adds its first two operands into the output, then reads the third:
    # had the output taken a's bytes, it would read 2a there (this was a real bug).
    with mg.name_scope():
        a = named(mg.tanh(mg.input("x", (2, 3))), "a")
        s = named(mg.add_n(a, a, a), "s")
        g = mg.Graph([mg.sum(s)])
    assert ("a", "s") not in pairs_of(g)
    assert same_run(g, mg.plan_memory(g, ONE))


def test_gradient_of_x_plus_x_plus_x_is_right_with_in_place():
    # autodiff turns h + h + h into add_n(g, g, g) in the backward pass
    with mg.name_scope():
        x = mg.input("x", (2, 3))
        w = mg.param("W", (2, 3))
        h = mg.tanh(x * w)
        g = mg.training_graph(mg.sum(h + h + h), [w], lr=1.0)
    assert any(n.op == "add_n" and len(set(n.inputs)) < len(n.inputs) for n in g.nodes)
    assert same_run(g, mg.plan_memory(g, ONE))


def test_each_input_hands_its_bytes_to_one_output_and_each_output_takes_one():
    with mg.name_scope():
        a = named(mg.relu(mg.input("x", (4, 4))), "a")
        b = named(mg.tanh(mg.input("y", (4, 4))), "b")
        c = named(mg.mul(a, b), "c")             # both a and b end here, both fit
        g = mg.Graph([mg.sum(c)])
    pairs = [p for p in pairs_of(g) if p[1] == "c"]
    assert pairs == [("a", "c")]


def test_reshape_goes_in_place():
    with mg.name_scope():
        a = named(mg.relu(mg.input("x", (4, 6))), "a")
        r = named(mg.reshape(a, (24,)), "r")
        g = mg.Graph([mg.sum(mg.tanh(r))])
    assert ("a", "r") in pairs_of(g)
    assert same_run(g, mg.plan_memory(g, ONE))


def test_handover_must_happen_at_one_step_at_one_offset():
    g = examples.sigmoid_chain(3)
    plan = mg.plan_memory(g, ONE).plan
    bufs = plan.buffers()
    validate_offsets(bufs, plan.offsets, plan.arena_bytes, 1, plan.inplace)
    with pytest.raises(mg.PlanError, match="not a hand-over"):
        validate_offsets(bufs, plan.offsets, None, 1, [("B", "D")])   # B ends before D
    with pytest.raises(mg.PlanError, match="overlap"):
        validate_offsets(bufs, plan.offsets, None, 1, [])   # no hand-overs declared


# --- the MXNet note [Chen 2016]: the two-layer perceptron ----------------------------------

def test_mxnet_note_mlp_act1_dfc1_dfc2_go_in_place():
    g, n = examples.two_layer_mlp()               # batch 64, 784 -> 128 -> 10
    pairs = set(mg.plan_memory(g, ONE).plan.inplace)
    assert (n["fc1"], n["act1"]) in pairs          # act1 = relu(fc1)
    assert (n["d(act1)"], n["d(fc1)"]) in pairs    # d(fc1) = relu_grad(d(act1), act1)
    assert (n["fc2"], n["d(fc2)"]) in pairs        # the loss gradient overwrites fc2


def test_mxnet_note_mlp_exact_bytes():
    g, n = examples.two_layer_mlp()
    fc, logits, dw1, dw2 = 64 * 128 * 4, 64 * 10 * 4, 784 * 128 * 4, 128 * 10 * 4
    none = mg.plan_memory(g, ONE.replace(inplace=False, planner="none"))
    assert none.arena_bytes == none.no_reuse_bytes == 4 * fc + 2 * logits + dw1 + dw2 == 542_720
    both = mg.plan_memory(g, ONE)
    # one block for fc1/act1 then d(W1); fc2/d(fc2); d(act1)/d(fc1); d(W2)
    assert both.arena_bytes == dw1 + logits + fc + dw2 == 441_856
    # at d(W1)'s step d(fc1), d(W1) and d(W2) are alive: nothing can do better
    assert both.theoretical_minimum == fc + dw1 + dw2 == 439_296
    assert same_run(g, both)
    # every size here is a multiple of 512 bytes: GE's alignment changes nothing
    aligned = mg.plan_memory(g, ONE.replace(alignment=512))
    assert (aligned.arena_bytes, aligned.no_reuse_bytes) == (441_856, 542_720)


# --- the validator's hand-over rule (issue 15, point 2) ------------------------------------

def _forced(graph: mg.Graph, a: str, b: str) -> mg.MemoryPlan:
    """graph's refcount plan with b moved onto a's bytes and (a, b) declared a hand-over."""
    plan = mg.plan_memory(graph, ONE.replace(inplace=False)).plan
    offsets = {**plan.offsets, b: plan.offsets[a]}
    arena = max(plan.arena_bytes, plan.offsets[a] + plan.size(b))
    return mg.MemoryPlan(plan.liveness, offsets, arena, [(a, b)], "forced", graph=graph)


def test_validator_refuses_a_handover_the_op_does_not_declare():
    # log_softmax reads a whole row (max, then sum of exp) before writing: not in-place
    with mg.name_scope():
        t = named(mg.tanh(mg.input("x", (4, 8))), "t")
        ls = named(mg.log_softmax(t), "ls")
        g = mg.Graph([named(mg.sum(mg.exp(ls)), "out")])
    forced = _forced(g, "t", "ls")
    with pytest.raises(mg.PlanError, match="log_softmax .* does not declare"):
        forced.validate()
    with pytest.raises(mg.PlanError, match="does not declare"):
        mg.Executor(g, forced)
    feeds = random_feeds(g)
    wrong = mg.Executor(g, forced, validate=False).run(feeds)     # what it refused
    assert not bytes_equal(mg.Executor(g).run(feeds), wrong)


def test_validator_refuses_a_handover_between_two_outputs_of_one_op():
    with mg.name_scope():
        x = mg.relu(mg.input("x", (4, 8)))
        y = mg.layer_norm(x, mg.param("gamma", (8,)), mg.param("beta", (8,)))
        g = mg.Graph([mg.sum(mg.tanh(y))])
    node = next(n for n in g.nodes if n.op == "layer_norm")
    mean, rstd = node.outputs[1], node.outputs[2]        # both [4, 1], made at one step
    forced = _forced(g, mean, rstd)
    with pytest.raises(mg.PlanError, match=f"{mean} is not an input of"):
        forced.validate()
    with pytest.raises(mg.PlanError, match="not a hand-over"):     # buffers alone, too
        validate_offsets(forced.buffers(), forced.offsets, None, 1, forced.inplace)


def test_handover_verdict_does_not_depend_on_list_order():
    # A [1,1] and B [1,3] are born at one step: A cannot hand its bytes to B, whichever
    # buffer is listed first (the old validator accepted one order and refused the other)
    a, b = Buffer("A", 1, 1, 64), Buffer("B", 1, 3, 64)
    for bufs in ([a, b], [b, a]):
        with pytest.raises(mg.PlanError, match="not a hand-over"):
            validate_offsets(bufs, {"A": 0, "B": 0}, handovers=[("A", "B")])
    ok = Buffer("A", 0, 1, 64)                           # born before B's step: fine
    for bufs in ([ok, b], [b, ok]):
        validate_offsets(bufs, {"A": 0, "B": 0}, handovers=[("A", "B")])


def test_each_buffer_gives_and_takes_its_bytes_once():
    bufs = [Buffer("a", 0, 1, 64), Buffer("b", 1, 2, 64), Buffer("c", 0, 1, 64)]
    offs = {"a": 0, "b": 0, "c": 0}
    with pytest.raises(mg.PlanError, match="already takes the bytes of"):
        validate_offsets(bufs, offs, handovers=[("a", "b"), ("c", "b")])
    with pytest.raises(mg.PlanError, match="not a planned buffer"):
        validate_offsets(bufs, offs, handovers=[("a", "zz")])


def test_validator_refuses_a_handover_whose_input_is_read_later_or_twice():
    g = examples.inplace_counterexample()               # B is read by C and, later, by F
    with pytest.raises(mg.PlanError, match="B is read after step"):
        _forced(g, "B", "C").validate()
    with mg.name_scope():                               # add_n(a, a, a): rule 5
        a = named(mg.tanh(mg.input("x", (2, 3))), "a")
        g3 = mg.Graph([mg.sum(named(mg.add_n(a, a, a), "s"))])
    with pytest.raises(mg.PlanError, match="reads a through 3 operands"):
        _forced(g3, "a", "s").validate()


def test_handovers_of_a_plan_without_its_graph_cannot_be_checked():
    g = examples.sigmoid_chain(3)
    plan = mg.plan_memory(g, ONE).plan
    hand_made = mg.MemoryPlan(plan.liveness, plan.offsets, plan.arena_bytes, plan.inplace)
    with pytest.raises(mg.PlanError, match="cannot be checked without the graph"):
        hand_made.validate()
    hand_made.validate(g)                               # with it: every pair keeps the rule
    assert same_run(g, mg.plan_memory(g, ONE))


# --- the strict rule: the op is the input's only reader (issue 16, point 4) -------------------
# MXNet's design note [Chen 2016] says out-degree 1, the GE blog [Huawei GE] a unique consumer;
# nnvm (and `inplace=True`) asks only that the op be the input's last reader.

STRICT = ONE.replace(inplace="strict")

STRICT_EXAMPLES = {
    "sigmoid_chain": lambda: examples.sigmoid_chain(3, shape=(16, 16)),
    "counterexample": lambda: examples.inplace_counterexample((16, 16)),
    "counterexample_f_first": lambda: examples.inplace_counterexample((16, 16), f_first=True),
    "mlp2": lambda: examples.two_layer_mlp(batch=8, n_in=32, hidden=16, classes=4)[0],
    "cnn_block": lambda: examples.cnn_block(image=32, channels=8),
    "branchy": lambda: examples.branchy(3, 3),
    "mlp_training": lambda: examples.mlp_training(depth=3, width=8, batch=4),
}


def test_strict_rule_refuses_the_counterexample_pair_the_last_reader_rule_takes():
    g = examples.inplace_counterexample()                 # B read by C, then by F
    live = mg.liveness(g, alignment=1)
    assert ("B", "F") in inplace_pairs(g, live)           # F is B's last reader
    strict = inplace_pairs(g, live, rule="strict")
    assert not [p for p in strict if p[0] == "B"]         # B has two readers: no one takes it
    assert strict == [("C", "G")]                         # G is C's only reader
    report = mg.plan_memory(g, STRICT)
    assert report.plan.inplace == strict and report.plan.inplace_rule == "strict"
    assert report.plan.offsets["F"] != report.plan.offsets["B"]
    # the strict verdict does not depend on the schedule; last-reader's does
    f_first = examples.inplace_counterexample(f_first=True)
    live_f = mg.liveness(f_first, alignment=1)
    assert inplace_pairs(f_first, live_f, rule="strict") == strict
    assert ("B", "C") in inplace_pairs(f_first, live_f)


def test_last_reader_handover_is_a_parallel_hazard_and_strict_has_none():
    # C and F both read B and the graph does not order them: run at once, F would write
    # over B while C reads it. With no sharing besides the hand-overs (planner "none"),
    # every hazard is an in-place one.
    g = examples.inplace_counterexample()
    loose = mg.plan_memory(g, ONE.replace(planner="none"))
    assert loose.plan.parallel_hazards(g) == [("B", "F")]
    for name, build in STRICT_EXAMPLES.items():
        g = build()
        plan = mg.plan_memory(g, STRICT.replace(planner="none")).plan
        assert plan.parallel_hazards(g) == [], name


def test_the_plan_records_its_rule_and_the_validator_checks_that_rule():
    g = examples.inplace_counterexample()
    assert mg.plan_memory(g, ONE).plan.inplace_rule == "last-reader"
    assert mg.plan_memory(g, ONE.replace(inplace=False)).plan.inplace_rule is None
    loose = mg.plan_memory(g, ONE).plan
    loose.validate(g)                                     # B -> F keeps the last-reader rule
    loose.inplace_rule = "strict"                         # ... not the strict one
    with pytest.raises(mg.PlanError, match=r"B -> F is refused \(strict rule\): B has 2 "
                                           r"readers \(C, F\)"):
        loose.validate(g)
    with pytest.raises(mg.PlanError, match="strict rule"):
        mg.Executor(g, loose)


@pytest.mark.parametrize("name", sorted(STRICT_EXAMPLES))
@pytest.mark.parametrize("planner", ["none", "refcount"])
def test_strict_arena_run_equals_the_unplanned_run(name, planner):
    g = STRICT_EXAMPLES[name]()
    report = mg.plan_memory(g, STRICT.replace(planner=planner, alignment=8))
    report.plan.validate(g)
    feeds = random_feeds(g)
    plain = mg.Executor(g).run(feeds)
    for _ in range(2):                                    # and again: nothing leaks
        assert bytes_equal(plain, mg.Executor(g, report.plan).run(feeds))


def test_strict_rule_still_hands_over_chains():
    # the sigmoid chain: each of B, C has one reader, so the chain still needs one buffer
    report = mg.plan_memory(examples.sigmoid_chain(3), STRICT)
    assert report.plan.inplace == [("B", "C"), ("C", "D")] and report.arena_bytes == 128
    # the CNN block: conv1_out is read by ReLU only
    cnn = mg.plan_memory(examples.cnn_block(image=32, channels=8), STRICT)
    assert cnn.plan.inplace == [("conv1_out", "relu1_out")]


# --- the GE blog's CNN block [Huawei GE]: ReLU in place, the pool output apart -------------

def test_blog_cnn_block_right_figures_with_and_without_the_input_held():
    from minigraph.memory import merge_inplace, theoretical_minimum
    from minigraph.memory.instances import blog_cnn_layout, cnn_block_buffers
    from minigraph.memory.planners import plan_buffers
    g = examples.cnn_block()
    inp, conv, pool = 602_112, 3_211_264, 802_816            # float32 bytes
    peaks = {}
    for held in (True, False):
        bufs, pairs = cnn_block_buffers(g, hold_input=held)
        assert sum(b.size for b in bufs) == inp + 2 * conv + pool == 7_827_456
        merged, group = merge_inplace(bufs, pairs)
        _, placed = plan_buffers(merged, "refcount", 1)
        validate_offsets(bufs, {t: placed.offsets[b] for t, b in group.items()},
                         handovers=pairs)
        peaks[held] = placed.arena_bytes
        assert peaks[held] == theoretical_minimum(merged)
    assert peaks == {True: inp + conv + pool, False: conv + pool}   # 4.62 / 4.01 MB
    buffers, offsets, handovers = blog_cnn_layout(g)                # the blog's 3.35 MB
    with pytest.raises(mg.PlanError, match="relu1_out .* pool1_out .* step 2"):
        validate_offsets(buffers, offsets, handovers=handovers)
    with pytest.raises(mg.PlanError, match="no tensor 'input_0'"):
        cnn_block_buffers(examples.sigmoid_chain(3))

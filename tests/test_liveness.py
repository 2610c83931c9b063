"""Liveness: intervals [first step, last step] inclusive, planned or not, aligned bytes.

Reads as a specification of minigraph/memory/liveness.py [Huawei GE, blog §3].
"""

from __future__ import annotations

import pytest
from graphgen import chain_graph, random_graph
from hypothesis import given, settings
from hypothesis import strategies as st

import minigraph as mg
from minigraph import examples
from minigraph.memory import live_bytes_per_step, theoretical_minimum
from minigraph.memory.liveness import check_schedule


def _blog_graph() -> mg.Graph:
    """The GE blog's liveness example [Huawei GE]: Op1 -> T1; Op2(T1) -> T2; Op3(T1) -> T3;
    Op4(T2, T3) -> Output."""
    with mg.name_scope():
        x = mg.input("Input", (4, 4))
        t1 = examples.named(mg.relu(x), "T1")
        t2 = examples.named(mg.tanh(t1), "T2")
        t3 = examples.named(mg.sigmoid(t1), "T3")
        out = examples.named(mg.add(t2, t3), "Output")
        return mg.Graph([out])


def test_interval_runs_from_producer_step_to_last_reader_step_inclusive():
    live = mg.liveness(_blog_graph(), alignment=1)
    iv = live.intervals
    assert (iv["T1"].start, iv["T1"].end) == (0, 2)   # made at step 0, last read at step 2
    assert (iv["T2"].start, iv["T2"].end) == (1, 3)
    assert (iv["T3"].start, iv["T3"].end) == (2, 3)


def test_blog_cnn_t1_and_t3_overlap_although_the_blog_says_they_may_share():
    # The blog's table gives T1 [1,2] and T3 [3,3] and concludes they can share a pool.
    # But Op3 *reads* T1 while it writes T3: with inclusive ends both live at Op3's step.
    live = mg.liveness(_blog_graph(), alignment=1)
    t1, t3 = live.intervals["T1"], live.intervals["T3"]
    assert t1.end == t3.start == 2
    b = {b.id: b for b in live.buffers()}
    assert b["T1"].overlaps_in_time(b["T3"])


def test_leaves_live_for_the_whole_schedule_and_are_not_planned():
    g = examples.cnn_block()
    live = mg.liveness(g, alignment=1)
    last = len(g.nodes) - 1
    for name in ("input_0", "conv1_w"):
        iv = live.intervals[name]
        assert (iv.start, iv.end, iv.planned) == (0, last, False)


def test_graph_outputs_live_to_the_end_and_are_not_planned():
    g = examples.cnn_block()
    iv = mg.liveness(g, alignment=1).intervals["pool1_out"]
    assert (iv.start, iv.end, iv.kind, iv.planned) == (2, 2, "output", False)


def test_graph_output_that_is_also_read_later_still_lives_to_the_end():
    with mg.name_scope():
        x = mg.input("x", (2, 2))
        a = mg.relu(x)
        b = mg.tanh(a)
        g = mg.Graph([a, mg.sum(b)])
    iv = mg.liveness(g).intervals[a.name]
    assert (iv.end, iv.planned) == (len(g.nodes) - 1, False)


def test_tensor_nobody_reads_lives_one_step():
    g = chain_graph(3, skip=0)
    # rebuild with an extra, unread output of node t0 (plain data)
    nodes = list(g.nodes)
    tensors = dict(g.tensors)
    tensors["dead"] = mg.TensorInfo("dead", (8,), "float32", "activation", producer="dead")
    nodes.insert(1, mg.Node("dead", "relu", (), ("x",), ("dead",)))
    g2 = mg.Graph.from_nodes(nodes, tensors, g.outputs)
    iv = mg.liveness(g2).intervals["dead"]
    assert iv.start == iv.end == g2.node_index["dead"] and iv.planned


def test_bytes_are_rounded_up_to_the_alignment():
    g = examples.sigmoid_chain(shape=(3, 5))          # 60 bytes each
    assert mg.liveness(g, alignment=1).intervals["B"].bytes == 60
    assert mg.liveness(g, alignment=512).intervals["B"].bytes == 512
    assert mg.liveness(g, alignment=64).intervals["B"].bytes == 64
    with pytest.raises(ValueError, match="alignment"):
        mg.liveness(g, alignment=0)


def test_updated_parameters_take_no_bytes_of_their_own():
    g, _ = examples.two_layer_mlp(batch=4, n_in=8, hidden=4, classes=3)
    live = mg.liveness(g)
    for name in ("W1_new", "W2_new"):
        assert live.intervals[name].bytes == 0 and not live.intervals[name].planned


def test_schedule_must_list_every_node_once_in_dependency_order():
    g = _blog_graph()
    order = [n.name for n in g.nodes]
    with pytest.raises(mg.GraphError, match="misses node Output"):
        check_schedule(g, order[:-1])
    with pytest.raises(mg.GraphError, match="before"):
        check_schedule(g, [order[1], order[0], *order[2:]])
    # Op3 before Op2 is another valid order: T1 then dies one step earlier
    other = [order[0], order[2], order[1], order[3]]
    live = mg.liveness(g, other, alignment=1)
    assert live.intervals["T1"].end == 2 and live.intervals["T2"].start == 2


def test_theoretical_minimum_is_the_largest_live_sum_of_any_step():
    g = _blog_graph()
    live = mg.liveness(g, alignment=1)
    per_step = live.live_bytes()
    # step 2 (Op3): T1, T2 and T3 all alive: 3 x 64 bytes
    assert per_step == [64, 128, 192, 128]
    assert live.theoretical_minimum() == max(per_step) == 192


def test_blog_cnn_cnn_block_liveness_figures():
    g = examples.cnn_block()
    live = mg.liveness(g, alignment=1)
    iv = live.intervals
    assert iv["input_0"].bytes == 3 * 224 * 224 * 4 == 602_112   # the blog says "150KB"
    assert iv["conv1_out"].bytes == 64 * 112 * 112 * 4 == 3_211_264
    assert iv["relu1_out"].bytes == 3_211_264
    assert iv["pool1_out"].bytes == 64 * 56 * 56 * 4 == 802_816
    assert [(iv[n].start, iv[n].end) for n in ("conv1_out", "relu1_out", "pool1_out")] == \
        [(0, 1), (1, 2), (2, 2)]
    # planned: conv1_out and relu1_out; both alive at step 1
    assert live.no_reuse_bytes() == 6_422_528
    assert live.theoretical_minimum() == 6_422_528
    assert live.unplanned_bytes() == {"input": 602_112, "param": 6_912, "output": 802_816}


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.integers(0, 10**6), st.integers(1, 60), st.booleans(), st.sampled_from([1, 512]))
def test_liveness_properties_on_random_graphs(seed, n_ops, train, alignment):
    g = random_graph(seed, n_ops, train)
    live = mg.liveness(g, alignment=alignment)
    pos = {n: k for k, n in enumerate(live.schedule)}
    outputs = set(g.outputs)
    for name, iv in live.intervals.items():
        t = g.tensors[name]
        assert iv.bytes % alignment == 0 and iv.bytes >= (0 if t.alias_of else t.nbytes)
        if t.producer is None:
            assert (iv.start, iv.end) == (0, live.steps - 1)
            continue
        assert iv.start == pos[t.producer]
        for c in g.consumers[name]:
            assert iv.start < pos[c] <= iv.end               # alive at every reader
        if name in outputs:
            assert iv.end == live.steps - 1 and not iv.planned
        elif g.consumers[name]:
            assert iv.end == max(pos[c] for c in g.consumers[name])
        assert iv.planned == (t.kind in ("activation", "gradient") and name not in outputs)
    bufs = live.buffers()
    assert theoretical_minimum(bufs) == max(live_bytes_per_step(bufs, live.steps), default=0)
    assert live.theoretical_minimum() <= live.no_reuse_bytes()

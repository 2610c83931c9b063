"""The model zoo: every model's training graph runs on NumPy and learns its fixed batch;
ResNet-50 at ImageNet size builds and plans symbolically (no run)."""

from __future__ import annotations

import numpy as np
import pytest

import minigraph as mg
from minigraph import examples, models
from minigraph.experiments.training import train
from minigraph.feeds import random_feeds
from minigraph.models import MODELS, Model, get_model

RUNNABLE = [name for name in MODELS if name != "resnet50"]


@pytest.fixture(scope="module", params=RUNNABLE)
def trained(request) -> tuple[Model, list[float]]:
    m = get_model(request.param)
    m.zoo_name = request.param
    return m, train(m, 30)[0]


def test_thirty_sgd_steps_on_the_fixed_batch_reduce_the_loss(trained) -> None:
    m, losses = trained
    assert len(losses) == 30 and np.all(np.isfinite(losses)), losses
    assert losses[-1] < 0.8 * losses[0], f"{m.name}: {losses[0]:.4f} -> {losses[-1]:.4f}"


def test_the_training_graph_has_forward_backward_and_update_nodes(trained) -> None:
    m, _ = trained
    g = m.graph
    assert {n.role for n in g} == {"forward", "backward", "update"}
    assert g.outputs == (m.loss, *(f"{p}_new" for p in m.params))
    assert set(m.params) == set(g.params)
    assert g.tensors[m.loss].shape == ()


def test_make_batch_matches_the_graph_inputs_and_is_fixed_by_its_seed(trained) -> None:
    m, _ = trained
    b0, b1 = m.make_batch(0), m.make_batch(0)
    assert set(b0) == set(m.graph.inputs)
    for k, v in b0.items():
        t = m.graph.tensors[k]
        assert v.shape == t.shape and v.dtype == np.dtype(t.dtype), k
        np.testing.assert_array_equal(v, b1[k])
    assert any(not np.array_equal(v, m.make_batch(1)[k]) for k, v in b0.items())


def test_names_are_stable_across_builds(trained) -> None:
    m, _ = trained
    again = get_model(m.zoo_name)
    assert [(n.name, n.inputs) for n in again.graph] == [(n.name, n.inputs) for n in m.graph]


def test_a_planned_run_gives_the_same_losses_as_no_reuse() -> None:
    m = get_model("transformer")
    plain = train(m, 3)[0]
    planned = train(m, 3, plan=mg.MemoryOptions(planner="refcount", inplace=True))[0]
    np.testing.assert_array_equal(plain, planned)


def test_train_with_another_lr_rebuilds_the_graph() -> None:
    m = get_model("mlp")
    assert m.with_lr(m.lr) is m
    m2 = m.with_lr(0.01)
    assert m2.lr == 0.01 and m.lr != 0.01
    lrs = {dict(n.attrs)["lr"] for n in m2.graph if n.op == "sgd_update"}
    assert lrs == {0.01}
    slow, fast = train(m, 5, lr=0.01)[0], train(m, 5)[0]
    assert slow[0] == fast[0] and slow[-1] > fast[-1]


def test_get_model_passes_batch_and_rejects_unknown_names() -> None:
    m = get_model("cnn", batch=3)
    assert m.graph.tensors["x"].shape[0] == 3
    with pytest.raises(mg.GraphError, match="unknown model 'vgg'.*mlp"):
        get_model("vgg")
    assert models.DEFAULT_MODEL in MODELS


def test_resnet_depths_use_the_right_blocks() -> None:
    r18 = models.resnet(depth=18)
    r50 = models.resnet(depth=50)
    assert sum(n.op == "conv2d" and n.role == "forward" for n in r18.graph) == 1 + 16 + 3
    assert sum(n.op == "conv2d" and n.role == "forward" for n in r50.graph) == 1 + 48 + 4
    with pytest.raises(ValueError, match="depth"):
        models.resnet(depth=19)


def test_resnet50_at_224_builds_and_plans_without_running() -> None:
    m = get_model("resnet50")
    g = m.graph
    assert g.tensors["x"].shape == (32, 3, 224, 224)
    nparams = sum(int(np.prod(g.tensors[p].shape)) for p in m.params)
    assert nparams == 25_557_032           # torchvision's resnet50 has the same count
    report = mg.plan_memory(g, planner="refcount", inplace=True)
    report.plan.validate()
    assert report.theoretical_minimum <= report.arena_bytes < report.no_reuse_bytes
    assert report.saved_percent > 50


def test_lstm_weights_get_one_aggregation_node_each() -> None:
    m = models.lstm(T=5)
    g = m.graph
    for w in ("Wx", "Wh"):
        dw = g.node(f"{w}_new").inputs[1]
        assert g.node(g.tensors[dw].producer).op == "add_n"
    assert len(g.node(g.tensors[g.node("Wx_new").inputs[1]].producer).inputs) == 5


def test_unet_skips_live_from_the_down_path_to_the_up_path() -> None:
    g = models.unet().graph
    live = mg.liveness(g)
    concat_inputs = [n.inputs for n in g if n.op == "concat" and n.role == "forward"]
    assert len(concat_inputs) == 2
    skip = concat_inputs[-1][1]                   # the first level's skip, used last
    assert live.intervals[skip].end - live.intervals[skip].start > len(g) // 4


def test_upsample2_is_nearest_neighbour() -> None:
    x = mg.input("x", (1, 1, 2, 2))
    y = models.upsample2(x)
    xv = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    out = mg.Executor(mg.Graph([y]), device="cpu").run(x=xv)[y.name]
    np.testing.assert_array_equal(out[0, 0], np.repeat(np.repeat(xv[0, 0], 2, 0), 2, 1))


def test_transformer_mask_is_causal() -> None:
    mask = models.causal_mask(4)
    assert mask[0, 1] < -1e8 and mask[1, 0] == 0 and mask[3, 3] == 0


def test_the_zoo_mlp_is_the_one_mlp_builder() -> None:
    m = models.mlp(batch=8, sizes=(16, 32, 5), lr=0.3)
    g = models.mlp_graph((16, 32, 5), 8, lr=0.3)
    assert g.nodes == m.graph.nodes and list(g.tensors) == list(m.graph.tensors)


def test_mlp_layers_number_parameters_from_first_and_skip_biases_on_request() -> None:
    g = models.mlp_graph((4, 6, 3), 2, bias=False, first=0, loss="mean", act_last=True)
    assert g.params == ["W0", "W1"] and g.inputs == ["x"]
    assert [n.op for n in g if n.role == "forward"] == ["matmul", "relu", "matmul", "relu",
                                                        "mean"]


def test_two_layer_mlp_uses_the_mxnet_note_names() -> None:
    g, names = examples.two_layer_mlp(batch=4, n_in=8, hidden=5, classes=3)
    assert {"fc1", "act1", "fc2", "loss", "data", "label"} <= set(g.tensors)
    assert g.producer(names["d(fc1)"]).op == "relu_grad"


def test_every_example_graph_builds_and_plans() -> None:
    for build in (examples.sigmoid_chain, examples.inplace_counterexample,
                  lambda: examples.two_layer_mlp()[0], examples.free_after_forward,
                  examples.branchy, examples.cnn_block, lambda: examples.linear_chain(5),
                  examples.mlp_training, lambda: examples.random_training_graph(3),
                  lambda: examples.wide_mlp((8, 16, 4), batch=2)):
        g = build()
        assert len(g) > 0, g.name
        mg.plan_memory(g, planner="refcount", inplace=True).plan.validate()


def test_random_feeds_gives_class_labels_and_the_models_parameters() -> None:
    m = models.mlp(batch=64, sizes=(4, 8, 3))
    feeds = random_feeds(m.graph, seed=2)
    assert set(feeds) == set(m.graph.inputs) | set(m.params)
    assert feeds["y"].dtype == np.int64 and 0 <= feeds["y"].min() and feeds["y"].max() < 3
    for p, v in m.init_params(2).items():
        np.testing.assert_array_equal(feeds[p], v)

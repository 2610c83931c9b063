"""Executor.load/step: the resident training loop gives the same numbers as run()."""

import numpy as np
import pytest

import minigraph as mg
from minigraph.models import get_model


def test_resident_steps_equal_repeated_runs_bitwise():
    m = get_model("mlp")
    report = mg.plan_memory(m.graph, mg.MemoryOptions(planner="refcount", inplace=True))
    feeds = {**m.make_batch(0), **m.init_params(0)}
    ex = mg.Executor(m.graph, report.plan, device="cpu")
    ex.load(feeds)
    ref = mg.Executor(m.graph, device="cpu")
    for k in range(3):
        got = {n: np.array(v) for n, v in ex.step(step=k).items()}
        want = ref.run(feeds, step=k)
        for p in m.graph.params:
            feeds[p] = want[f"{p}_new"]
        for n in want:
            assert np.array_equal(got[n], want[n]), n


def test_step_before_load_is_a_clear_error():
    m = get_model("mlp")
    with pytest.raises(mg.FeedError, match="load"):
        mg.Executor(m.graph).step()


def _loaded_mlp():
    m = get_model("mlp")
    feeds = {**m.make_batch(0), **m.init_params(0)}
    ex = mg.Executor(m.graph, device="cpu")
    ex.load(feeds)
    return m, feeds, ex


def _first(m, kind):
    return next(t for t in m.graph.leaves("input") if np.dtype(t.dtype).kind == kind)


def test_step_checks_feeds_as_run_does_no_broadcast_no_scalar_fill():
    m, feeds, ex = _loaded_mlp()
    x = _first(m, "f")
    with pytest.raises(mg.FeedError, match=rf"feed '{x.name}': expected shape"):
        ex.step({x.name: np.ones(x.shape[-1:], x.dtype)})     # would broadcast over rows
    with pytest.raises(mg.FeedError, match=rf"feed '{x.name}': expected shape"):
        ex.step({x.name: 1.0})                               # would fill the input
    with pytest.raises(mg.FeedError, match="unknown feed 'nope'"):
        ex.step({"nope": 1.0})


def test_step_refuses_float_labels_instead_of_truncating_them():
    m, feeds, ex = _loaded_mlp()
    y = _first(m, "i")
    with pytest.raises(mg.FeedError, match=rf"feed '{y.name}': expected dtype {y.dtype}"):
        ex.step({y.name: feeds[y.name].astype(np.float64) + 0.7})
    ex.step({y.name: feeds[y.name]})                         # the right dtype still runs

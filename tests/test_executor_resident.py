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

"""Swap and recomputation together on a chain (planners/engine/swap_remat.py): the dynamic
program's answer is the brute-force optimum of its own model, replayed by `evaluate`."""

from __future__ import annotations

import itertools
import random

import pytest

from minigraph.errors import SwapError
from minigraph.memory.planners.engine.swap_remat import (
    KINDS,
    Chain,
    best_schedule,
    evaluate,
)
from minigraph.memory.swap import Machine


def _chain(seed: int, n: int) -> Chain:
    rng = random.Random(seed)
    sizes = (0, *(rng.choice((1, 2, 3, 4)) * 1000 for _ in range(n)))
    fw = tuple(rng.choice((1.0, 2.0, 3.0)) for _ in range(n))
    return Chain(sizes, fw, tuple(2 * t for t in fw))


def _brute(chain, budget, machine, kinds):
    best = None
    for d in itertools.product(kinds, repeat=chain.n - 1):
        peak, t = evaluate(chain, "".join(d), machine)
        if peak <= budget and (best is None or t < best - 1e-12):
            best = t
    return best


@pytest.mark.parametrize("seed", range(8))
def test_the_program_finds_the_brute_force_optimum_for_each_kind(seed):
    chain = _chain(seed, 6)
    machine = Machine(bandwidth=1000.0, latency=0.5)      # 1000 B/s: copies of seconds
    top, _ = evaluate(chain, "K" * (chain.n - 1), machine)
    for frac in (1.0, 0.8, 0.6, 0.45):
        budget = int(top * frac)
        for allow, kinds in KINDS.items():
            want = _brute(chain, budget, machine, kinds)
            if want is None:
                with pytest.raises(SwapError, match=f"fits budget {budget} B"):
                    best_schedule(chain, budget, machine, allow)
                continue
            plan = best_schedule(chain, budget, machine, allow)
            assert set(plan.decisions) <= set(kinds)
            assert plan.peak <= budget and plan.seconds == pytest.approx(want), (allow, frac)


def test_both_is_never_slower_than_either_alone_and_fits_lower():
    chain = _chain(3, 10)
    machine = Machine(bandwidth=2000.0, latency=0.1)
    top, base = evaluate(chain, "K" * 9, machine)
    fits = {}
    for allow in KINDS:
        lowest = None
        for budget in range(top, 0, -500):
            try:
                plan = best_schedule(chain, budget, machine, allow)
            except SwapError:
                break
            lowest = plan.peak
            if allow == "both":
                for alone in ("swap", "recompute"):
                    try:
                        other = best_schedule(chain, budget, machine, alone)
                    except SwapError:
                        continue
                    assert plan.seconds <= other.seconds + 1e-9
        fits[allow] = lowest
    assert fits["both"] <= min(fits["swap"], fits["recompute"])
    everything = best_schedule(chain, top, machine)
    assert everything.seconds == pytest.approx(base) and everything.overhead == pytest.approx(0)


def test_an_unknown_kind_is_a_one_line_swap_error():
    with pytest.raises(SwapError, match="allow must be one of both, swap, recompute, not 'x'"):
        best_schedule(_chain(0, 3), 10**9, Machine(), "x")

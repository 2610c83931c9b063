"""How does planning time grow with the number of buffers?

    python benchmarks/plan_scaling.py            # 1,000 to 100,000 buffers
    python benchmarks/plan_scaling.py --quick    # 1,000 to 20,000 buffers
    python benchmarks/plan_scaling.py --family realistic   # one family only

Every heuristic planner (the search planners "search", "anneal" and "ilp" run for
whatever time they are given, so they are left out) on three families, each as a
markdown table of CPU seconds (`time.process_time`, so other processes on the machine do
not count); then "search" and "anneal" on the largest realistic graph, against bestfit,
each with a work budget (search nodes or repair moves, anneal moves, seed 0: the same
plan at any load, issue 46) and capped at the time a fast planner may take there (10 s;
the "cap" column says "hit" where the cap, not the budget, stopped it); last, both on a 20,000-op
linear chain at a 2 s limit and at a small work budget, against the best plain heuristic:

- random: `random_buffers(n)`, about 30 buffers alive at any step whatever n is;
- hard: `hard_instance(n)`, guillotine tilings with n / 10 steps, where about sqrt(n)
  buffers are alive at a step, so even an n log n planner does more work per buffer;
- realistic: `realistic_buffers(n)`, the liveness of a training step (activations held
  from their forward step to their gradient step, so thousands are alive at the turn;
  sizes from 256 B to 256 MiB), 5,000 to 60,000 buffers as real training graphs give.

The garbage collector is off while a planner runs, as in `timeit`: its pauses grow with
every object alive in the process, not with the planner's work. Each time is the fastest
of `--repeat` runs, taken in rounds over all the sizes: a shared machine's speed drifts
(here by a fifth within a minute), and timing one size after the other would read the
drift as growth. The growth exponent is the slope of log(time) against log(n), fitted by
least squares (1 = linear, about 1.1 for n log n over this range, 2 = quadratic). The
last column is the arena over the theoretical minimum (max-live) at the largest n.
"""

from __future__ import annotations

import argparse
import gc
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from minigraph.memory.buffers import theoretical_minimum  # noqa: E402
from minigraph.memory.instances import (  # noqa: E402
    hard_instance,
    random_buffers,
    realistic_buffers,
)
from minigraph.memory.planners import get_planner  # noqa: E402

PLANNERS = ["none", "refcount", "ge-max", "ge-binary", "ge-hybrid", "ge", "greedy-size",
            "bestfit"]
SIZES = [1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000]
QUICK_SIZES = [1_000, 2_000, 5_000, 10_000, 20_000]
REALISTIC_SIZES = [5_000, 10_000, 20_000, 40_000, 60_000]
QUICK_REALISTIC_SIZES = [2_000, 5_000, 10_000, 20_000]
FAMILIES = ("random", "hard", "realistic")
SEARCH_LIMIT = 10.0     # seconds: what a fast planner may take at the largest size (a cap)
SEARCH_BUDGETS = {"search": {"node_limit": 2_000}, "anneal": {"iterations": 1_000, "seed": 0}}
# --quick's largest graph (20,000 buffers) is not optimal at the start: the search's repair
# moves take ~10 ms each there, so a budget of 2,000 would run into the cap
QUICK_SEARCH_BUDGETS = {"search": {"node_limit": 300}, "anneal": {"iterations": 1_000, "seed": 0}}


def exponent(ns: list[int], ts: list[float]) -> float:
    """Least-squares slope of log t against log n (points under 1 ms are too noisy)."""
    pts = [(math.log(n), math.log(t)) for n, t in zip(ns, ts) if t >= 1e-3]
    if len(pts) < 2:
        return float("nan")
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx


def family(name: str, make, sizes: list[int], repeat: int) -> None:
    print(f"## {name}\n")
    cols = ["planner"] + [f"{n:,}" for n in sizes] + ["exponent", f"ratio at {sizes[-1]:,}"]
    print("| " + " | ".join(cols) + " |")
    print("| " + " | ".join(["---"] * len(cols)) + " |")
    problems = {n: make(n) for n in sizes}
    minima = {n: theoretical_minimum(b) for n, b in problems.items()}
    for planner in PLANNERS:
        fn = get_planner(planner)
        times = [float("inf")] * len(sizes)
        for _ in range(repeat):             # round and round the sizes, so that a machine
            for k, n in enumerate(sizes):   # slower for a while slows every size alike
                gc.collect()
                gc.disable()                # as timeit does: no collector pauses
                t0 = time.process_time()
                placed = fn(problems[n])
                times[k] = min(times[k], time.process_time() - t0)
                gc.enable()
        ratio = placed.arena_bytes / minima[sizes[-1]]
        cells = [planner] + [f"{t:.3f}" for t in times] + [f"{exponent(sizes, times):.2f}",
                                                            f"{ratio:.4f}"]
        print("| " + " | ".join(cells) + " |", flush=True)
    print()


def searches(buffers: list, label: str, time_limit: float,
             budgets: dict[str, dict[str, int]]) -> None:
    """The search planners at the largest size, each with its work budget
    (`budgets`) and capped at `time_limit` s (the cap covers its setup, bestfit's
    start plan included): each must improve on bestfit, or keep bestfit's plan and say
    why. Wall-clock seconds, the collector on, as a user runs. The cap also decides
    whether the search builds its tables and the annealer its overlap lists (not when
    they would take more than half the time left: "... s left allow" in the note); far
    from that threshold, as at these sizes, the choice is the same at any load."""
    print(f"## search and anneal on {label}, work budgets, capped at {time_limit:g} s each\n")
    print("| planner | budget | arena / max-live | bestfit's arena / max-live | wall time (s) "
          "| cap | note |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    low = theoretical_minimum(buffers)
    start = get_planner("bestfit")(buffers).arena_bytes / low
    for planner, budget in budgets.items():
        t0 = time.perf_counter()
        placed = get_planner(planner)(buffers, time_limit=time_limit, **budget)
        took = time.perf_counter() - t0
        said = ", ".join(f"{k}={v:,}" for k, v in budget.items())
        hit = "hit" if "time limit" in placed.note or took >= 0.98 * time_limit else "-"
        print(f"| {planner} | {said} | {placed.arena_bytes / low:.4f} | {start:.4f} | "
              f"{took:.2f} | {hit} | {placed.note} |", flush=True)
    print()


CHAIN = 20_000          # the chain of issue 46: a short limit there once returned 1.38x
CHAIN_LIMIT = 2.0       # seconds


def chain(n: int, time_limit: float) -> None:
    """"search" and "anneal" on the DTR paper's linear chain of `n` ops (`linear_chain`,
    alignment 1), at a short time limit and at a small work budget: each must end at or
    below the best plain heuristic's arena (best fit, greedy-size, GE), which it starts
    from and always finishes."""
    from minigraph.examples import linear_chain  # a graph only this table needs
    from minigraph.memory import MemoryOptions, plan_memory  # with it, the one entry point
    graph = linear_chain(n)
    print(f"## search and anneal on a {n:,}-op linear chain, at {time_limit:g} s or a small "
          "work budget\n")
    print("| planner | budget | arena / max-live | best plain heuristic / max-live | "
          "<= it | note |")
    print("| --- | --- | --- | --- | --- | --- |")
    reports = {p: plan_memory(graph, MemoryOptions(planner=p, alignment=1))
               for p in ("bestfit", "greedy-size", "ge")}
    low = reports["bestfit"].theoretical_minimum
    best = min(r.arena_bytes for r in reports.values())
    for planner, budget in (("search", {"time_limit": time_limit}),
                            ("search", {"time_limit": None, "node_limit": 2000}),
                            ("anneal", {"time_limit": time_limit}),
                            ("anneal", {"iterations": 200})):
        r = plan_memory(graph, MemoryOptions(planner=planner, alignment=1,
                                             planner_args=budget))
        said = ", ".join(f"{k}={v}" for k, v in budget.items() if v is not None)
        print(f"| {planner} | {said} | {r.arena_bytes / low:.4f} | {best / low:.4f} | "
              f"{'yes' if r.arena_bytes <= best else 'NO'} | {r.plan.note} |", flush=True)
    print()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="up to 20,000 buffers, each size measured once")
    ap.add_argument("--repeat", type=int, default=None,
                    help="runs per point, the fastest is kept (default 5, quick 1)")
    ap.add_argument("--family", choices=FAMILIES, action="append",
                    help="only this family (may be repeated; default: all three)")
    args = ap.parse_args(argv)
    sizes = QUICK_SIZES if args.quick else SIZES
    repeat = args.repeat or (1 if args.quick else 5)
    chosen = args.family or FAMILIES
    print("# Static memory planning: time against size (CPU seconds)\n")
    if "random" in chosen:
        family("random buffers (bounded overlap)", lambda n: random_buffers(n, seed=0),
               sizes, repeat)
    if "hard" in chosen:
        family("hard instances (about sqrt(n) alive per step)",
               lambda n: hard_instance(n, capacity=1 << 24, steps=max(n // 10, 8), seed=0),
               sizes, repeat)
    if "realistic" in chosen:
        sizes = QUICK_REALISTIC_SIZES if args.quick else REALISTIC_SIZES
        family("realistic training graphs (activations held until their gradient step)",
               lambda n: realistic_buffers(n, seed=0), sizes, repeat)
        searches(realistic_buffers(sizes[-1], seed=0),
                 f"the realistic training graph of {sizes[-1]:,} buffers", SEARCH_LIMIT,
                 QUICK_SEARCH_BUDGETS if args.quick else SEARCH_BUDGETS)
    chain(CHAIN, CHAIN_LIMIT)
    return 0


if __name__ == "__main__":
    sys.exit(main())

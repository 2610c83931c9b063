"""How does planning time grow with the number of buffers?

    python benchmarks/plan_scaling.py            # 1,000 to 100,000 buffers
    python benchmarks/plan_scaling.py --quick    # 1,000 to 20,000 buffers

Every heuristic planner (the search planners "anneal" and "ilp" run for whatever time
they are given, so they are left out) on two families, each as a markdown table of CPU
seconds (`time.process_time`, so other processes on the machine do not count):

- random: `random_buffers(n)`, about 30 buffers alive at any step whatever n is;
- hard: `hard_instance(n)`, guillotine tilings with n / 10 steps, where about sqrt(n)
  buffers are alive at a step, so even an n log n planner does more work per buffer.

The growth exponent is the slope of log(time) against log(n), fitted by least squares
(1 = linear, about 1.1 for n log n over this range, 2 = quadratic). The last column is
the arena over the theoretical minimum at the largest n.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from minigraph.memory.buffers import theoretical_minimum  # noqa: E402
from minigraph.memory.instances import hard_instance, random_buffers  # noqa: E402
from minigraph.memory.planners import get_planner  # noqa: E402

PLANNERS = ["none", "refcount", "ge-max", "ge-binary", "ge-hybrid", "ge", "greedy-size",
            "bestfit"]
SIZES = [1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000]
QUICK_SIZES = [1_000, 2_000, 5_000, 10_000, 20_000]


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
        times, ratio = [], float("nan")
        for n in sizes:
            best = float("inf")
            for _ in range(repeat):
                t0 = time.process_time()
                placed = fn(problems[n])
                best = min(best, time.process_time() - t0)
            times.append(best)
            ratio = placed.arena_bytes / minima[n]
        cells = [planner] + [f"{t:.3f}" for t in times] + [f"{exponent(sizes, times):.2f}",
                                                            f"{ratio:.3f}"]
        print("| " + " | ".join(cells) + " |", flush=True)
    print()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="up to 20,000 buffers, each size measured once")
    ap.add_argument("--repeat", type=int, default=None,
                    help="runs per point, the fastest is kept (default 2, quick 1)")
    args = ap.parse_args(argv)
    sizes = QUICK_SIZES if args.quick else SIZES
    repeat = args.repeat or (1 if args.quick else 2)
    print("# Static memory planning: time against size (CPU seconds)\n")
    family("random buffers (bounded overlap)", lambda n: random_buffers(n, seed=0), sizes,
           repeat)
    family("hard instances (about sqrt(n) alive per step)",
           lambda n: hard_instance(n, capacity=1 << 24, steps=max(n // 10, 8), seed=0),
           sizes, repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())

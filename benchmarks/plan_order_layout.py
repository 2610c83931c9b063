"""Order and layout chosen together (MODeL [Steiner 2023]) against the best fixed order.

    python benchmarks/plan_order_layout.py            # 60 s per joint solve
    python benchmarks/plan_order_layout.py --quick    # 10 s per joint solve, fewer sizes

Two markdown tables:

- bytes: on small graphs (the CANN article's worked example as a graph, the two-branch
  trap, the zoo MLP and a few source examples), the best fixed-order plan (the exact
  fixed-order ILP, `ilp`, under every order of `topo.BEST_OF`, the smallest kept) against
  the joint program (`model-ilp`), with the joint program's best bound and gap;
- time: the joint program on graphs of growing size (zoo MLPs of 1 to 3 hidden layers,
  `examples.mlp_training` of depth 1 to 4), CPU seconds (`time.process_time`, so other
  processes on the machine do not count; the time limit itself is wall-clock) and the
  gap it reaches within its time limit.

Every plan comes from `plan_memory` (alignment 512) and passes its validator.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import minigraph as mg  # noqa: E402
from minigraph import examples  # noqa: E402
from minigraph.memory.planners.joint import plan_joint  # noqa: E402
from minigraph.memory.topo import BEST_OF  # noqa: E402
from minigraph.models import get_model  # noqa: E402

FIXED_LIMIT = 10.0          # seconds per fixed-order ILP


def zoo_mlp(hidden: int):
    return get_model("mlp", sizes=(64,) + (128,) * hidden + (10,)).graph


BYTES_GRAPHS = [
    ("CANN worked example", examples.ge_worked_graph),
    ("two-branch trap", examples.order_trap),
    ("MXNet note's MLP", lambda: examples.two_layer_mlp(batch=8, n_in=16, hidden=8,
                                                       classes=4)[0]),
    ("branchy 3x2", lambda: examples.branchy(3, 2)),
    ("zoo mlp", lambda: zoo_mlp(1)),
    ("mlp_training depth 2", lambda: examples.mlp_training(depth=2, width=8, batch=2)),
    ("mlp_training depth 3", lambda: examples.mlp_training(depth=3, width=8, batch=2)),
]
TIME_GRAPHS = [(f"zoo mlp, {k} hidden", lambda k=k: zoo_mlp(k)) for k in (1, 2, 3)] + \
    [(f"mlp_training depth {d}", lambda d=d: examples.mlp_training(depth=d, width=8, batch=2))
     for d in (1, 2, 3, 4)]
QUICK_TIME = ["zoo mlp, 1 hidden", "mlp_training depth 1", "mlp_training depth 2",
              "mlp_training depth 3"]


def best_fixed(graph) -> tuple[int, str, str]:
    """(arena, order, the fixed-order ILP's note) of the smallest fixed-order plan."""
    best = None
    for order in BEST_OF:
        rep = mg.plan_memory(graph, order=order, planner="ilp",
                             planner_args={"time_limit": FIXED_LIMIT})
        if best is None or rep.arena_bytes < best[0]:
            best = (rep.arena_bytes, order, rep.plan.note.split(" (")[0])
    assert best is not None
    return best


def joint(graph, limit: float) -> tuple[mg.MemoryReport, float]:
    """The joint plan through `plan_memory`, and the CPU seconds it took."""
    t0 = time.process_time()
    rep = mg.plan_memory(graph, planner="model-ilp", planner_args={"time_limit": limit})
    return rep, time.process_time() - t0


def status(note: str) -> str:
    """"optimal" or "gap x%" from a model-ilp note."""
    return note.split(" over every order")[0]


def bytes_table(limit: float) -> None:
    print("## Bytes: best fixed-order plan against order and offsets together\n")
    print(f"Joint time limit {limit:g} s; fixed-order ILP {FIXED_LIMIT:g} s per order.\n")
    print("| graph | nodes | best fixed order | its arena (B) | joint arena (B) | bound (B) "
          "| joint | saved (B) | saved | joint CPU s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, make in BYTES_GRAPHS:
        g = make()
        fixed, order, fixed_note = best_fixed(g)
        rep, cpu = joint(g, limit)
        jp_bound = int(rep.plan.note.split("bound ")[1].split(" B")[0])
        saved = fixed - rep.arena_bytes
        print(f"| {name} | {len(g.nodes)} | {order} ({fixed_note}) | {fixed:,} | "
              f"{rep.arena_bytes:,} | {jp_bound:,} | {status(rep.plan.note)} | {saved:,} | "
              f"{100.0 * saved / fixed:.1f}% | {cpu:.2f} |")
    print()


def time_table(limit: float, quick: bool) -> None:
    print("## Time: the joint program as the graph grows\n")
    print(f"Time limit {limit:g} s (wall); CPU seconds measured.\n")
    print("| graph | nodes | planned tensors | pairs | start (B) | found (B) | bound (B) | "
          "result | CPU s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, make in TIME_GRAPHS:
        if quick and name not in QUICK_TIME:
            continue
        g = make()
        t0 = time.process_time()
        jp = plan_joint(g, alignment=512, time_limit=limit)
        cpu = time.process_time() - t0
        tensors = len(mg.liveness(g).planned())
        print(f"| {name} | {len(g.nodes)} | {tensors} | {jp.pairs} | {jp.fixed_arena:,} | "
              f"{jp.arena_bytes:,} | {jp.bound:,} | {status(jp.note)} | {cpu:.2f} |")
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10 s limits, fewer sizes")
    args = ap.parse_args()
    limit = 10.0 if args.quick else 60.0
    import scipy.optimize  # noqa: F401  (its first import is not any row's time)
    bytes_table(limit)
    time_table(limit, args.quick)


if __name__ == "__main__":
    main()

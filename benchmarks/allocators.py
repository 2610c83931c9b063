"""Online allocators against static plans, per model: reserved / minimum and fragmentation.

    python benchmarks/allocators.py            # zoo models at MiB-sized tensors, DTR at 80% and 60%
    python benchmarks/allocators.py --quick    # three smaller models, DTR at 70%

Each model's training step is traced under its program order; every allocator in
`minigraph.memory.online.ALLOCATORS`, every registered static planner ("ilp"/"anneal"
with a short time limit, skipped on big graphs) and the theoretical minimum give a row.
DTR runs (simulated: costs only, no kernels) are replayed through the same allocators and
planned offline, when `minigraph.runtime.dtr` is installed. The last table puts PyTorch's
expandable segments (20 MiB pages, as PyTorch maps the large pool, and 2 MiB pages) beside
the caching allocator and GMLake. Everything printed is computed; the time at the end is
CPU time (`time.process_time`), since other work on the machine disturbs wall time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from minigraph.examples import wide_mlp  # noqa: E402
from minigraph.experiments.allocators import compare_allocators, dtr_runs  # noqa: E402
from minigraph.memory.online import ALLOCATORS  # noqa: E402

FULL = [
    ("mlp", dict(batch=256, sizes=(1024, 4096, 2048, 1000))),
    ("cnn", dict(batch=128, image=28)),
    ("resnet", dict(depth=18, image=64, batch=16, width=16)),
    ("transformer", dict(layers=4, heads=8, seq=256, d_model=512, batch=8, vocab=1000)),
    ("lstm", dict(T=32, hidden=512, batch=64, input=256)),
    ("unet", dict(batch=4, image=64, width=16)),
    ("densenet", dict(batch=16, image=32, growth=12)),
]
QUICK = [
    ("mlp", dict(batch=256, sizes=(1024, 4096, 2048, 1000))),
    ("resnet", dict(depth=10, image=32, batch=16, width=16)),
    ("transformer", dict(layers=2, heads=4, seq=128, d_model=256, batch=8, vocab=500)),
]


def models(quick: bool):
    """(label, graph) pairs from the zoo; hand-built MLPs if the zoo cannot be imported."""
    try:
        from minigraph.models import get_model
    except ImportError as e:
        print(f"(model zoo not available: {e}; using hand-built MLPs)\n")
        yield "mlp-wide", wide_mlp((1024, 4096, 1024, 2048, 512), batch=256)
        yield "mlp-deep", wide_mlp((512, 2048) * 4 + (256,), batch=512)
        return
    for name, kw in (QUICK if quick else FULL):
        yield name, get_model(name, **kw).graph


def pivot(rows, value, methods, fmt) -> list[str]:
    keys = []
    for r in rows:
        if (r.model, r.trace) not in keys:
            keys.append((r.model, r.trace))
    out = ["| model | trace | minimum MiB | " + " | ".join(methods) + " |",
           "|---|---|---:|" + "---:|" * len(methods)]
    for k in keys:
        by = {r.method: r for r in rows if (r.model, r.trace) == k}
        cells = []
        for m in methods:
            v = value(by[m]) if m in by else None
            cells.append("-" if v is None else fmt(v))
        out.append(f"| {k[0]} | {k[1]} | {by['minimum'].peak / 2**20:.1f} | "
                   + " | ".join(cells) + " |")
    return out


EXPANDABLE = ("caching", "expandable", "expandable-2m", "gmlake")


def expandable_table(rows) -> list[str]:
    """Reserved / minimum, then device calls (cudaMalloc for caching and GMLake, map calls
    with the pages they map for expandable segments), for the four relatives."""
    keys = list(dict.fromkeys((r.model, r.trace) for r in rows))
    out = ["| model | trace | minimum MiB | " + " | ".join(EXPANDABLE) + " | "
           + " | ".join(f"{m} calls" for m in EXPANDABLE) + " |",
           "|---|---|---:|" + "---:|" * 2 * len(EXPANDABLE)]
    for k in keys:
        by = {r.method: r for r in rows if (r.model, r.trace) == k}
        if not all(m in by for m in EXPANDABLE):
            continue
        ratios = [f"{by[m].ratio:.3f}" for m in EXPANDABLE]
        calls = [f"{by[m].device_calls}" + (f" ({by[m].pages} pages)" if by[m].pages
                                              else "")
                 + (f" / {by[m].stitches} st." if by[m].stitches else "") for m in EXPANDABLE]
        out.append(f"| {k[0]} | {k[1]} | {by['minimum'].peak / 2**20:.1f} | "
                   + " | ".join(ratios + calls) + " |")
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="three smaller models, one DTR run")
    ap.add_argument("--no-dtr", action="store_true", help="leave the DTR runs out")
    args = ap.parse_args(argv)
    t0 = time.process_time()
    ratios = (0.7,) if args.quick else (0.8, 0.6)
    limit = 0.3 if args.quick else 1.0
    rows, notes = [], []
    for label, graph in models(args.quick):
        dtr = {} if args.no_dtr else dtr_runs(graph, ratios, notes=notes)
        rows += compare_allocators(graph, name=label, allocators=tuple(ALLOCATORS),
                                   time_limit=limit, slow_above=150, dtr=dtr)
    online = list(ALLOCATORS)
    static = sorted({r.method for r in rows if r.kind == "static"})
    print("## Reserved / theoretical minimum (1.000 is perfect)\n")
    print("\n".join(pivot(rows, lambda r: r.ratio, ["no reuse", *online, *static],
                          lambda v: f"{v:.3f}")))
    print("\n## Online allocators: fragmentation (reserved - peak in use, MiB)\n")
    print("\n".join(pivot(rows, lambda r: None if r.fragmentation is None else
                          r.fragmentation / 2**20, online, lambda v: f"{v:.1f}")))
    print("\n## Online allocators: largest free block / free bytes at the peak\n")
    print("\n".join(pivot(rows, lambda r: r.largest_free_ratio, online,
                          lambda v: f"{v:.0%}")))
    print("\n## Online allocators: device allocations (cudaMalloc-like calls) and stitches\n")
    print("\n".join(pivot(rows, lambda r: (r.device_calls, r.stitches), online,
                          lambda v: f"{v[0]}" + (f" / {v[1]} st." if v[1] else ""))))
    skipped = sorted({(r.model, r.trace, r.method, r.note) for r in rows
                      if r.reserved is None})
    if skipped:
        print("\nNot run: " + "; ".join(f"{m}/{t} {p} ({n})" for m, t, p, n in skipped))
    for n in notes:
        print(f"\nDTR run left out ({n})")
    if args.no_dtr:
        print("\n(no DTR rows: --no-dtr)")
    print("\n## PyTorch's expandable segments beside the caching allocator and GMLake\n")
    print("\n".join(expandable_table(rows)))
    print(f"\n{len(rows)} rows in {time.process_time() - t0:.1f} s of CPU time")


if __name__ == "__main__":
    main()

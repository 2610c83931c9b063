"""DTR on the model zoo: every heuristic at budgets 0.8 ... 0.2 of the no-rematerialisation
peak, compute overhead and fragmentation-forced evictions, as markdown tables.

    python benchmarks/dtr.py             # five zoo models, simulated mode + real mode rows
    python benchmarks/dtr.py --quick     # smaller models, fewer heuristics, no real mode

Simulated mode uses the op FLOP estimates as costs and the first-fit arena (the same
decisions a real run makes); two extra rows show `dtr` under the DTR paper's assumption
(an "ideal" allocator with no fragmentation) and with MegEngine-style compaction
(`defrag="first"`). Real mode runs the kernels (NumPy) in one arena of exactly the budget.
A cell reads `x1.044/3`: total compute over base compute / evictions forced by
fragmentation; `below` = under the smallest feasible budget, `stuck` = the run could not
place a tensor, `thrash` = stopped at 10x the base compute. Everything printed is computed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from minigraph.errors import BudgetError, ThrashError  # noqa: E402
from minigraph.models import get_model  # noqa: E402
from minigraph.runtime.dtr import (  # noqa: E402
    HEURISTICS,
    DTRExecutor,
    DTRRuntime,
    program_from_graph,
)

RATIOS = (0.8, 0.6, 0.5, 0.4, 0.3, 0.2)
FULL = [
    ("ResNet", "resnet", dict(depth=50, image=32, batch=8, width=8)),
    ("Transformer", "transformer", dict(layers=8, seq=64, d_model=64, batch=8)),
    ("LSTM", "lstm", dict(T=32, hidden=32, batch=256, input=16)),
    ("U-Net", "unet", dict(image=32, batch=8, width=4, depth=4)),
    ("DenseNet", "densenet", dict(image=32, batch=8, growth=6, blocks=(6, 12),
                                  init_channels=8)),
]
QUICK = [
    ("ResNet", "resnet", dict(depth=18, image=32, batch=8, width=8)),
    ("Transformer", "transformer", dict(layers=4, seq=64, d_model=64, batch=8)),
    ("LSTM", "lstm", dict(T=16, hidden=32, batch=256, input=16)),
]
TARGETS = [("ResNet", "dtr", 0.5, 1.15), ("Transformer", "dtr", 0.5, 1.10),
           ("LSTM", "dtr", 0.4, 1.20)]


def cell(program, ratio, heuristic, **kw):
    b = program.bounds()
    budget = int(ratio * b.peak)
    if budget < b.lower:
        return "below", None
    try:
        tr = DTRRuntime(program, budget, heuristic, timeline=False, **kw).run()
    except ThrashError:
        return "thrash", None
    except BudgetError:
        return "stuck", None
    return f"x{tr.overhead:.3f}/{tr.frag_forced_evictions}", tr


def real_cell(model, program, ratio, heuristic, feeds):
    b = program.bounds()
    budget = int(ratio * b.peak)
    if budget < b.lower:
        return "below", None
    try:
        ex = DTRExecutor(model.graph, budget, heuristic=heuristic)
        ex.run(feeds)
    except ThrashError:
        return "thrash", None
    except BudgetError:
        return "stuck", None
    tr = ex.last_trace
    return f"x{tr.overhead:.3f}/{tr.frag_forced_evictions} ({tr.seconds:.1f}s)", tr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-real", action="store_true", help="skip the real-mode rows")
    ap.add_argument("--models", default="", help="comma-separated labels to run")
    args = ap.parse_args()
    configs = QUICK if args.quick else FULL
    if args.models:
        keep = set(args.models.split(","))
        configs = [c for c in configs if c[0] in keep]
    heuristics = ["dtr", "dtr-eqclass", "dtr-local", "msps", "lru", "size", "megengine",
                  "coop"] if not args.quick else ["dtr", "lru", "megengine", "coop"]
    assert set(heuristics) <= set(HEURISTICS)
    results: dict[tuple[str, str, float], str] = {}
    real_rows: dict[str, dict[tuple[str, float], object]] = {}
    for label, name, kw in configs:
        t0 = time.perf_counter()
        model = get_model(name, **kw)
        p = program_from_graph(model.graph)
        b = p.bounds()
        print(f"\n### {label}: {model.graph.name} {kw}, {len(p.ops)} ops, peak "
              f"{b.peak / 2**20:.2f} MiB, smallest feasible budget {b.lower / b.peak:.2f} "
              f"x peak, guaranteed {b.safe / b.peak:.2f} x peak\n")
        print("| heuristic (sim) | " + " | ".join(f"{r:.1f}" for r in RATIOS) + " |")
        print("|---|" + "---:|" * len(RATIOS))
        rows = [(h, h, {}) for h in heuristics] + [
            ("dtr, ideal allocator", "dtr", {"allocator": "ideal"}),
            ("dtr, defrag first", "dtr", {"defrag": "first"})]
        for shown, h, opts in rows:
            cells = []
            for r in RATIOS:
                text, _ = cell(p, r, h, **opts)
                results[(label, shown, r)] = text
                cells.append(text)
            print(f"| {shown} | " + " | ".join(cells) + " |")
        if not args.no_real and not args.quick:
            feeds = model.feeds()
            print("\n| heuristic (real, NumPy) | " + " | ".join(f"{r:.1f}" for r in
                                                              (0.8, 0.6)) + " |")
            print("|---|---:|---:|")
            real_rows[label] = {}
            for h in ("dtr", "megengine", "coop"):
                cells = []
                for r in (0.8, 0.6):
                    text, tr = real_cell(model, p, r, h, feeds)
                    real_rows[label][(h, r)] = tr if tr is not None else text
                    cells.append(text)
                print(f"| {h} | " + " | ".join(cells) + " |")
        print(f"\n({time.perf_counter() - t0:.0f} s)")

    print("\n### Targets\n")
    for label, h, r, limit in TARGETS:
        for shown in (h, "dtr, ideal allocator"):
            text = results.get((label, shown, r))
            if text is None:
                continue
            ok = text.startswith("x") and float(text[1:].split("/")[0]) <= limit
            print(f"- {label}, {shown} at {r}: {text.split('/')[0]} (target <= {limit}): "
                  f"{'met' if ok else 'NOT met'}")
    for label, cells in real_rows.items():
        for r in (0.8, 0.6):
            d = cells.get(("dtr", r))
            for h in ("megengine", "coop"):
                o = cells.get((h, r))
                if isinstance(d, str) or isinstance(o, str):
                    print(f"- {label} real at {r}: {h} vs dtr: not comparable ({h} "
                          f"{o if isinstance(o, str) else 'ok'}, dtr "
                          f"{d if isinstance(d, str) else 'ok'})")
                    continue
                ok = o.frag_forced_evictions < d.frag_forced_evictions
                print(f"- {label} real at {r}: {h} {o.frag_forced_evictions} vs dtr "
                      f"{d.frag_forced_evictions} fragmentation-forced evictions: "
                      f"{'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()

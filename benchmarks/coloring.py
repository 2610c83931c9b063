"""Colouring and safe mode on the zoo: arena bytes against parallel hazards.

    python benchmarks/coloring.py            # every zoo model
    python benchmarks/coloring.py --quick    # four models

For each zoo training graph (refcount planner with nnvm's last-reader in-place, alignment
512, program order): no colouring; k = 2 and 4 colours with paths weighed by bytes
("bytes") and by nodes, through coloured nodes (nnvm's `ColorNodeGroup` [NNVM 2016]);
safe mode alone and with k = 4 nnvm colours. A hazard is a pair of tensors sharing bytes
whose uses the graph's edges leave unordered (`MemoryPlan.parallel_hazards`) [Chen 2016].
Planning time is CPU time (`time.process_time`), so other processes on the machine
disturb it little. Every number is computed here.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from minigraph.memory import MemoryOptions, plan_memory  # noqa: E402

MODELS = ["mlp", "cnn", "resnet", "transformer", "lstm", "unet", "densenet", "resnet50"]
QUICK_MODELS = ["mlp", "cnn", "resnet", "transformer"]
BASE = MemoryOptions(planner="refcount", inplace=True)
VARIANTS = {
    "no colouring": {},
    "k=2 bytes": {"colors": 2},
    "k=4 bytes": {"colors": 4},
    "k=2 nnvm": {"colors": 2, "coloring": "nnvm"},
    "k=4 nnvm": {"colors": 4, "coloring": "nnvm"},
    "safe": {"safe": True},
    "safe + k=4 nnvm": {"safe": True, "colors": 4, "coloring": "nnvm"},
}


def row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="four models")
    args = ap.parse_args()
    from minigraph.models import get_model
    models = QUICK_MODELS if args.quick else MODELS
    print("### Zoo training graphs (refcount + in-place, alignment 512, program order)\n\n"
          "`x no colouring`: arena / the arena without colours; time is CPU time "
          "(`time.process_time`).\n")
    print(row("model", "variant", "arena (B)", "x no colouring", "hazards", "note",
              "time (ms)"))
    print(row(*["---"] * 7))
    totals: dict[str, list[float]] = {v: [0.0, 0, 0] for v in VARIANTS}
    for name in models:
        graph = get_model(name).graph
        base = None
        for variant, kw in VARIANTS.items():
            t0 = time.process_time()
            report = plan_memory(graph, BASE.replace(**kw))
            ms = (time.process_time() - t0) * 1000
            hazards = len(report.plan.parallel_hazards(graph))
            base = base or report.arena_bytes
            ratio = report.arena_bytes / base
            totals[variant][0] += ratio
            totals[variant][1] += hazards
            totals[variant][2] += ms
            note = report.plan.note if kw.get("safe") else ""
            print(row(name, variant, report.arena_bytes, f"{ratio:.3f}", hazards, note,
                      f"{ms:.1f}"))
    print(f"\n### Over the {len(models)} models\n")
    print(row("variant", "mean x no colouring", "hazards (sum)", "time (ms, sum)"))
    print(row(*["---"] * 4))
    for variant, (ratio, hazards, ms) in totals.items():
        print(row(variant, f"{ratio / len(models):.3f}", int(hazards), f"{ms:.0f}"))
    safe = [totals[v][1] for v in VARIANTS if VARIANTS[v].get("safe")]
    print(f"\nsafe mode leaves {int(sum(safe))} hazards in all.")
    return 0 if sum(safe) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

"""The GPU path, measured: minigraph on CuPy (one arena) against PyTorch eager, same step.

    python benchmarks/gpu.py                   # on a machine with an NVIDIA GPU, CuPy, torch
    python benchmarks/gpu.py --dry-run         # the same tables on NumPy, tiny sizes (no GPU)
    python benchmarks/gpu.py --json F --write  # also the rows as JSON, and RESULTS.md
    python benchmarks/gpu.py --add-compile F   # then torch.compile's rows into F's results

The measuring is `minigraph/experiments/gpu.py` (its docstring says what each column is);
`benchmarks/gpu_run.sh` runs this on a lent GPU after the GPU tests.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import minigraph as mg  # noqa: E402
from minigraph.experiments.gpu import (  # noqa: E402
    DRY_SIZES,
    GPU_SIZES,
    op_profile,
    run,
    tables,
    targets,
)
from minigraph.experiments.torch_idiomatic import bench_idiomatic  # noqa: E402
from minigraph.files import write_text  # noqa: E402
from minigraph.models import get_model  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="NumPy, tiny models, no GPU")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--dtr-ratio", type=float, default=0.8)
    ap.add_argument("--models", default="mlp,resnet,transformer")
    ap.add_argument("--json", help="also write the rows as JSON to this file")
    ap.add_argument("--profile", action="store_true",
                    help="also print where the planned step's time goes, op by op")
    ap.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    ap.add_argument("--compile", action="store_true",
                    help="also time torch.compile's step (its compiling takes minutes)")
    ap.add_argument("--add-compile", metavar="JSON",
                    help="time torch.compile's step of each model of the results in JSON, "
                         "add the rows there (saved after each model) and print the tables")
    args = ap.parse_args(argv)
    device = "cpu" if args.dry_run else "gpu"
    if device == "gpu" and not mg.gpu_available():
        print("no GPU visible to CuPy: run with --dry-run", file=sys.stderr)
        return 2
    sizes = DRY_SIZES if args.dry_run else GPU_SIZES
    repeats = 3 if args.dry_run else args.repeats
    if args.add_compile:
        results = add_compile(args.add_compile, device, sizes, repeats, args.warmup,
                              args.models.split(","))
    else:
        results = run(device, sizes, repeats, args.warmup, args.dtr_ratio,
                      args.models.split(","), compile_=args.compile)
    text = tables(results) + "\n\ntargets:\n" + "\n".join(f"- {t}" for t in targets(results))
    print(text)
    if args.profile:
        print(profiles(device, sizes, args.models.split(",")))
    if args.json and not args.add_compile:
        write_text(args.json, json.dumps(results, indent=1) + "\n")
    if args.write:
        write_results(text, "GPU (benchmarks/gpu.py)" if not args.dry_run
                      else "GPU script, dry run on NumPy (benchmarks/gpu.py --dry-run)")
    return 0


def add_compile(path: str, device: str, sizes: dict, repeats: int, warmup: int,
                models: list[str]) -> dict:
    """torch.compile's rows of `models`, model by model, into the results saved at `path`
    (each saved at once, so that a time limit keeps what was measured)."""
    results = json.loads(Path(path).read_text())
    for name, row in results["models"].items():
        if name not in models:
            continue
        model = get_model(name, **sizes[name])
        rows = row.setdefault("idiomatic", {}) or {}
        rows["torch.compile"] = bench_idiomatic(model, device, "torch.compile", repeats,
                                                warmup)
        row["idiomatic"] = rows
        print(f"[{name}] torch.compile: {rows['torch.compile']}", file=sys.stderr, flush=True)
        write_text(path, json.dumps(results, indent=1) + "\n")
    return results


def profiles(device: str, sizes: dict, models: list[str]) -> str:
    """Per model, the op kinds that take the planned step's time (`op_profile`)."""
    out = []
    for name in models:
        model = get_model(name, **sizes[name])
        rows = op_profile(model, device, model.feeds(0))
        out += ["", f"{name}: time per op kind, planned step ({sum(r[2] for r in rows):.2f} ms "
                f"of kernels)", "", "| op | kernels | ms/step | share |",
                "| --- | ---: | ---: | ---: |"]
        out += [f"| {op} | {n} | {ms:.2f} | {share:.1%} |" for op, n, ms, share in rows[:15]]
    return "\n".join(out)


def write_results(text: str, title: str) -> None:
    path = Path(__file__).with_name("RESULTS.md")
    old = path.read_text() if path.exists() else "# Benchmark results\n"
    head = f"## {title}"
    sections = old.split("\n## ")
    kept = [s for s in sections[1:] if not ("## " + s).startswith(head)]
    write_text(path, sections[0].rstrip() + "\n\n" + "\n\n".join(
        ["## " + s.rstrip() for s in kept] + [f"{head}\n\n{text}"]) + "\n")


if __name__ == "__main__":
    sys.exit(main())

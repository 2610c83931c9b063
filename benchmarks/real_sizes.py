"""Real models at real sizes, from shapes alone: the GE blog's savings table, checked (issue 49).

    python benchmarks/real_sizes.py           # ResNet-50 batch 32, BERT-base seq 512,
                                              # ViT-Large 224x224, LLaMA-7B-shaped seq 2048
    python benchmarks/real_sizes.py --quick   # the reduced sizes the tests use (same code)
    python benchmarks/real_sizes.py --only resnet50,bert_base

Each model (`minigraph.fromtorch.real_sizes`, plain PyTorch on the meta device: no weight
allocated, no kernel run) is imported with `from_torch` twice: inference (the forward pass
alone, eval mode, GE's setting) and one SGD training step. For each, the table of
`minigraph.experiments.estimate`: weights, no reuse, the theoretical minimum, refcount, GE,
best fit, greedy by size (in-place off and on), DTR simulated at 24/40/80 GB devices, each
the whole run's bytes (float32). Then the GE blog's inference figures [Huawei GE] beside
minigraph's, and where they cannot be right, with the reason. The import and planning time
and the process's peak host memory are printed too (measured, never asserted).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from minigraph.experiments.estimate import blog_check, estimate  # noqa: E402
from minigraph.fromtorch import from_torch  # noqa: E402
from minigraph.fromtorch.real_sizes import REAL_MODELS, REDUCED, real_model  # noqa: E402

SIZES = {"resnet50": "batch 32, 224x224", "bert_base": "batch 1, sequence 512",
         "vit_large": "batch 1, 224x224, patch 16", "llama_7b": "batch 1, sequence 2048"}


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20   # KiB on Linux


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the reduced sizes of the tests")
    ap.add_argument("--only", default="", help="comma-separated model names")
    args = ap.parse_args(argv)
    names = [n for n in REAL_MODELS if not args.only or n in args.only.split(",")]
    print("Real models from shapes alone (PyTorch's meta device), float32; every figure "
          "is the whole run: weights, inputs, outputs and the planned working memory.")
    if args.quick:
        print("--quick: the reduced sizes of tests/test_fromtorch_meta.py, not the real ones")
    for name in names:
        sizes = REDUCED[name] if args.quick else {}
        print(f"\n### {name}" + ("" if args.quick else f" ({SIZES[name]})") + "\n\n```")
        results = {}
        for mode in ("inference", "training"):
            case = real_model(name, **sizes)
            t0 = time.perf_counter()
            model = from_torch(case.module, case.example_inputs,
                               None if mode == "inference" else case.loss_fn,
                               targets=() if mode == "inference" else case.targets)
            t1 = time.perf_counter()
            est = estimate(name, mode, model.graph)
            t2 = time.perf_counter()
            results[mode] = est
            print("\n".join(est.lines()))
            print(f"  (import {t1 - t0:.1f} s, planning and DTR {t2 - t1:.1f} s, "
                  f"peak host memory so far {peak_rss_gib():.2f} GiB; "
                  f"{len(model.report.opaque)} opaque nodes)")
        if not args.quick:
            print("\n".join(blog_check(name, results["inference"])))
        print("```")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Swap on a real copy stream: the measured link, a swap plan against the plan without
swapping and against PyTorch's save_on_cpu on the decoder (issue 44, item 3).

    python benchmarks/swap_gpu.py             # on a lent GPU (CuPy, PyTorch with CUDA)
    python benchmarks/swap_gpu.py --dry-run   # on NumPy, small sizes: the code runs

The decoder is `experiments.gpu.GPU_SIZES["transformer"]` on a GPU, the zoo's default
transformer in the dry run. The swap plan's budget is 0.7 x the arena of bestfit +
in-place; its copy stream is predicted with the link measured here. Every number is
measured or computed here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from minigraph.experiments.gpu import GPU_SIZES  # noqa: E402
from minigraph.experiments.swap_gpu import (  # noqa: E402
    bench_save_on_cpu,
    bench_swap,
    measure_link,
    summary,
)
from minigraph.memory.swap import Machine  # noqa: E402
from minigraph.models import get_model  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="NumPy, small sizes")
    args = ap.parse_args()
    device = "cpu" if args.dry_run else "gpu"
    model = get_model("transformer", **({} if args.dry_run else GPU_SIZES["transformer"]))
    link = measure_link(device, large=1 << (22 if args.dry_run else 28))
    machine = Machine(bandwidth=min(link["h2d_bandwidth"], link["d2h_bandwidth"]),
                      latency=max(link["h2d_latency"], link["d2h_latency"]))
    swap = bench_swap(model, device, machine=machine, repeats=3 if args.dry_run else 10)
    torch_rows = bench_save_on_cpu(model, device, repeats=3 if args.dry_run else 10)
    print(f"### Swap on {'NumPy (dry run: no GPU)' if args.dry_run else 'the GPU'}: "
          f"{model.name}\n")
    print(summary(link, swap, torch_rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

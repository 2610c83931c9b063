"""Memory swap beside recomputation: device memory, host memory, bytes moved, predicted time.

    python benchmarks/swap.py            # every zoo model (but resnet50)
    python benchmarks/swap.py --quick    # four models, smaller batches

Budgets are working memory (arena + the largest workspace, `memory/footprint.py`) as a
fraction of the static plan's (greedy-size, program order, alignment 512). Swap is
`plan_swap` (memory/swap.py's greedy choice, the same planner packing the split buffers);
DTR is `simulate` at the same working memory (h_DTR's runtime defaults). Time is
predicted, not measured: each op its FLOPs at 50 TFLOP/s plus a 5 us launch, each copy
10 us + bytes / 25 GB/s (PCIe 4.0 x16) unless a row names another link, on a copy stream
beside the compute stream (`swap.copy_stream`); DTR's overhead is its replays in the
same seconds. "DTR+swap" is DTR choosing per victim between dropping and swapping it,
the cheaper of the two (`DTROptions(evict="cheaper")`, runtime/dtr/hostswap.py, Capuchin's
choice [Peng 2020]): its copies run on the one stream, each charged in full (no overlap),
so its overhead is an upper bound; "moved" is bytes out / in. "both" on a chain
(swap and recomputation planned together) is the dynamic program
(`planners/engine/swap_remat.py`, after POFO [Beaumont 2021]), shown on a stack of dense
layers. The largest batch in a fixed memory is Capuchin's measure [Peng 2020]. Every
number is computed here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from minigraph.errors import SwapError  # noqa: E402
from minigraph.experiments.swap import (  # noqa: E402
    Row,
    chain_rows,
    compare,
    largest_batch,
    largest_chain_batch,
    mlp_chain,
)
from minigraph.memory import MemoryOptions, plan_memory  # noqa: E402
from minigraph.memory.swap import Machine  # noqa: E402
from minigraph.memory.swap_plan import MACHINES, lowest_swap_plan  # noqa: E402

MODELS = ["mlp", "cnn", "resnet", "transformer", "lstm", "unet", "densenet"]
QUICK_MODELS = ["mlp", "cnn", "resnet", "transformer"]
FRACTIONS = (0.75, 0.5)
LINKS = {"2 GB/s": Machine(bandwidth=2e9), **MACHINES}
CHAIN = [256] * 13


def row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def pct(x: float | None) -> str:
    return "does not fit" if x is None else f"+{100 * x:.1f}%"


def kib(n: int | None) -> str:
    return "-" if n is None else f"{n / 1024:.1f}"


def moved(r: Row) -> str:
    if not r.device:
        return "-"
    if isinstance(r.moved, tuple):
        return f"{kib(r.moved[0])} / {kib(r.moved[1])}"
    return kib(r.moved)


def budgets(models: list[str]) -> None:
    from minigraph.models import get_model
    print("### Per zoo model and budget: static, swap, DTR, DTR+swap (PCIe 4.0 x16)\n")
    print(row("model", "budget", "technique", "device KiB", "host KiB",
              "moved KiB each way", "predicted overhead"))
    print(row(*["---"] * 7))
    for name in models:
        g = get_model(name).graph
        for f in FRACTIONS:
            for r in compare(g, f):
                print(row(name, f"{f:.2f} x ({kib(r.budget)} KiB)", r.technique, kib(r.device),
                          kib(r.host) if r.device else "-", moved(r), pct(r.overhead)))


def reduction(models: list[str]) -> None:
    from minigraph.models import get_model
    print("\n### The lowest arena swap reaches, against the no-swap plan (greedy-size)\n")
    print(row("model", "no-swap arena KiB", "theoretical minimum KiB", "swap arena KiB",
              "device reduction", "tensors swapped", "host KiB", "copies hidden",
              "predicted overhead"))
    print(row(*["---"] * 9))
    for name in models:
        g = get_model(name).graph
        opts = MemoryOptions(planner="greedy-size")
        plain = plan_memory(g, opts)
        low = lowest_swap_plan(g, opts)
        print(row(name, kib(plain.arena_bytes), kib(plain.theoretical_minimum),
                  kib(low.arena_bytes), f"{100 * (1 - low.arena_bytes / plain.arena_bytes):.1f}%",
                  len(low.swaps), kib(low.host_bytes), f"{len(low.hidden())} of {len(low.swaps)}",
                  pct(low.timing.overhead)))


def links(models: list[str]) -> None:
    from minigraph.models import get_model
    print("\n### Swap's predicted overhead by link, at 0.5 x the static working memory "
          "(DTR and DTR+swap beside it)\n")
    print(row("model", *LINKS, "DTR", *(f"DTR+swap {k}" for k in LINKS)))
    print(row(*["---"] * (2 * len(LINKS) + 2)))
    for name in models:
        g = get_model(name).graph
        per_link = [{r.technique: r for r in compare(g, 0.5, m)} for m in LINKS.values()]
        print(row(name, *(pct(rows["swap"].overhead) for rows in per_link),
                  pct(per_link[-1]["DTR"].overhead),
                  *(pct(rows["DTR+swap"].overhead) for rows in per_link)))


def chain(quick: bool) -> None:
    print(f"\n### A stack of {len(CHAIN) - 1} dense layers of width {CHAIN[0]}, batch 64: "
          "swap, recomputation and both (the dynamic program)\n")
    ch = mlp_chain(CHAIN, 64)
    print(row("budget (x peak)", "link", "both", "swap alone", "recomputation alone"))
    print(row(*["---"] * 5))
    for f in (0.8, 0.6, 0.4):
        for name, machine in LINKS.items():
            if quick and name not in ("2 GB/s", "pcie4", "nvlink-c2c"):
                continue
            r = chain_rows(ch, f, machine)
            print(row(f"{f:.1f}", name, *(pct(v[1] if v else None) for v in r.values())))


def batches(models: list[str], quick: bool) -> None:
    from minigraph.models import get_model
    tries = (1, 2, 4, 8) if quick else (1, 2, 4, 8, 16, 32)
    print("\n### The largest batch in a fixed device memory (Capuchin's measure)\n")
    print("The memory: the static plan's working memory at batch 2.\n")
    print(row("model", "memory KiB", "static", "swap", "DTR", "DTR+swap"))
    print(row(*["---"] * 6))
    for name in models:
        def build(b: int, name: str = name):
            return get_model(name, batch=b).graph
        memory = plan_memory(build(2), MemoryOptions(planner="greedy-size")).working_bytes
        cells = []
        for tech in ("static", "swap", "DTR", "DTR+swap"):
            try:
                cells.append(largest_batch(build, memory, tech, tries))
            except SwapError as e:
                cells.append(f"error: {e}")
        print(row(name, kib(memory), *cells))
    print(f"\nThe dense stack in 1 MiB of activations (batches up to 256): keep "
          f"{largest_chain_batch(CHAIN, 2**20, 'keep')}, swap "
          f"{largest_chain_batch(CHAIN, 2**20, 'swap')}, recomputation "
          f"{largest_chain_batch(CHAIN, 2**20, 'recompute')}, both "
          f"{largest_chain_batch(CHAIN, 2**20, 'both')}.")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="four models, smaller batches")
    args = ap.parse_args()
    models = QUICK_MODELS if args.quick else MODELS
    budgets(models)
    reduction(models)
    links(models)
    chain(args.quick)
    batches(models, args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Static plans and DTR in one counting: the table of the lead's closing note.

    python benchmarks/same_counting.py [--models mlp cnn ...] [--points 40] [--no-torch]

For every zoo model (`minigraph.models.MODELS`, ResNet-50 at ImageNet size included: DTR is
simulated, so it takes seconds), lesson 00's MLP and lesson 10's PyTorch SmallNet (skipped
without PyTorch), one row, every byte of the same schedule (program order) and alignment (512),
counted as `minigraph/memory/footprint.py` counts them:

- theoretical minimum: the most planned tensor bytes alive at one step (in-place on);
- working minimum: the same plus the running op's workspace, at the worst step: no run of
  this schedule that recomputes nothing holds less arena + workspace;
- best static: best-fit + in-place, its arena and its working memory (arena + the
  largest workspace, which the executor takes beside it);
- DTR: its smallest budget (working memory: tensors and workspace in one range) on a grid
  of `--points` budgets between the smallest that could work and the run without
  eviction, the working memory it used there, and the compute it paid.

"below" says whether DTR's budget is under the working minimum: only recomputation gets
there. The numbers are computed here, on the spot (simulated DTR, no kernels).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minigraph.experiments.techniques import Counted, same_counting  # noqa: E402
from minigraph.graph import fmt_bytes  # noqa: E402
from minigraph.lessons.l00 import mlp_step  # noqa: E402
from minigraph.models import MODELS, get_model  # noqa: E402


def lesson_10_graph():
    """Lesson 10's SmallNet (the same module, batch and loss), imported from PyTorch; None
    without PyTorch."""
    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except ImportError:
        return None
    from minigraph.fromtorch import from_torch

    torch.manual_seed(0)

    class SmallNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(8)
            self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
            self.fc = nn.Linear(16 * 4 * 4, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            return self.fc(torch.flatten(x, 1))

    net = SmallNet().train()
    x, y = torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))
    return from_torch(net, (x,), F.cross_entropy, targets=(y,), lr=0.1,
                      name="small_net").graph


def rows(models: list[str], points: int, torch: bool = True) -> list[Counted]:
    out = [same_counting(get_model(m).graph, m, points=points) for m in models]
    out.append(same_counting(mlp_step(), "lesson 00 MLP", points=points))
    g = lesson_10_graph() if torch else None
    if g is not None:
        out.append(same_counting(g, "lesson 10 SmallNet", points=points))
    return out


def table(counted: list[Counted]) -> str:
    head = ("| model | nodes | theoretical minimum | working minimum | best static: arena "
            "(working) | DTR smallest budget | DTR used | compute | DTR below the working "
            "minimum? |")
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for c in counted:
        used = "-" if c.dtr_used is None else fmt_bytes(c.dtr_used)
        cost = "-" if c.dtr_overhead is None else f"x{c.dtr_overhead:.2f}"
        why = "yes" if c.below else (
            "no: at the worst step the running op's own inputs, outputs and workspace "
            "fill it" if c.dtr_lower >= c.working_minimum else "no")
        lines.append(f"| {c.name} | {c.nodes} | {fmt_bytes(c.theoretical_minimum)} | "
                     f"{fmt_bytes(c.working_minimum)} | {fmt_bytes(c.static_arena)} "
                     f"({fmt_bytes(c.static_working)}) | {fmt_bytes(c.dtr_budget)} | {used} "
                     f"| {cost} | {why} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--points", type=int, default=40)
    ap.add_argument("--no-torch", action="store_true", help="leave lesson 10's model out")
    args = ap.parse_args(argv)
    print(table(rows(args.models, args.points, not args.no_torch)))
    print("\nAll bytes: program order, 512-byte alignment. Working memory = arena + "
          "workspace; a DTR budget counts the same bytes. DTR's smallest budget is the "
          f"smallest of {args.points + 1} budgets from the smallest that could work to "
          "the run without eviction at which it finishes.")
    return 0


if __name__ == "__main__":
    sys.exit(main())

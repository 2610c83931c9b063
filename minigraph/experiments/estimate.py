"""What each memory technique holds for a model at its real size, from shapes alone.

`estimate(model)` plans one imported graph (`from_torch` on the meta device: nothing
allocated) with each technique: no reuse, the theoretical minimum, refcount [Chen 2016],
GE [Huawei GE], best fit [Sekiyama 2018] and greedy by size [Pisarchyk 2020], in-place off
and on, and DTR [Kirisame 2021] simulated at the device budgets of common GPUs (24, 40 and
80 GB). Each figure is the whole run's bytes: the weights, inputs, constants and outputs
(which no plan reuses) plus the planned working memory (`MemoryReport.outside_bytes +
working_bytes`). `blog_check` sets the GE blog's figures [Huawei GE] beside it and says where
they cannot be right. The benchmark (benchmarks/real_sizes.py), `minigraph estimate` and
lesson 10b print the same table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import BudgetError, ThrashError
from ..graph import Graph, fmt_bytes
from ..memory import MemoryOptions, plan_memory
from ..runtime.dtr import DTROptions, budget_bounds, simulate

GB = 10**9
# DTR's heuristic over a sample of 32 candidates (the DTR paper's sampling), stopped past 3x
# the compute: a 6,000-node training step simulates in seconds, not minutes.
DTR_OPTIONS = DTROptions(heuristic="dtr", sample=32, thrash_limit=3.0, timeline=False)
DEVICES = (24, 40, 80)        # GB: an RTX 4090 / A10-class card, an A100 40 GB, an 80 GB card
TECHNIQUES = (("no reuse", "none", False), ("refcount", "refcount", False),
              ("GE", "ge", False), ("GE + in-place", "ge", True),
              ("best fit", "bestfit", False), ("best fit + in-place", "bestfit", True),
              ("greedy by size", "greedy-size", False),
              ("greedy by size + in-place", "greedy-size", True))
# The GE blog's inference figures (GB): without optimisation, with the memory pool, with
# pool and in-place (ResNet-50 only); "savings stable at 30-50%".
BLOG = {"resnet50": (8.2, 5.1, 4.3), "bert_base": (2.1, 1.4, None),
        "vit_large": (5.8, 3.9, None), "llama_7b": (39.0, 25.0, None)}


@dataclass
class Estimate:
    """The rows of one model's table: (technique, bytes of the whole run or None, note)."""
    name: str
    mode: str
    nodes: int
    weights: int
    outside: int
    rows: list[tuple[str, int | None, str]] = field(default_factory=list)

    def bytes_of(self, label: str) -> int:
        return next(b for k, b, _ in self.rows if k == label)

    def lines(self) -> list[str]:
        out = [f"{self.name} ({self.mode}, {self.nodes} nodes): weights {gb(self.weights)}, "
               f"everything no plan reuses (weights, inputs, outputs) {gb(self.outside)}"]
        width = max(len(k) for k, _, _ in self.rows)
        for k, b, note in self.rows:
            out.append(f"  {k:<{width}}  {'' if b is None else gb(b):>9}  {note}".rstrip())
        return out


def gb(n: int) -> str:
    """Decimal gigabytes, as the GE blog writes them; below 10 MB, bytes in binary units."""
    return f"{n / GB:.2f} GB" if n >= 10**7 else fmt_bytes(n)


def estimate(name: str, mode: str, graph: Graph,
             progress: Callable[[Iterable[Any]], Iterable[Any]] = lambda it: it) -> Estimate:
    """Plan `graph` with every technique of the table; `progress` wraps the loop (tqdm)."""
    kinds = graph.bytes_by_kind()
    steps = [*TECHNIQUES, *(("DTR", d, None) for d in DEVICES)]
    est = None
    for label, planner, inplace in progress(steps):
        if label == "DTR":
            est.rows.append(_dtr(graph, planner))
            continue
        rep = plan_memory(graph, MemoryOptions(planner=planner, inplace=inplace))
        if est is None:
            est = Estimate(name, mode, len(graph.nodes), kinds.get("param", 0),
                           rep.outside_bytes)
            est.rows.append(("weights", est.weights, "parameters (fed, never reused)"))
            est.rows.append(("theoretical minimum", rep.outside_bytes +
                             rep.theoretical_minimum,
                             "the most bytes live at once in this order, perfectly packed"))
        est.rows.append((label, rep.outside_bytes + rep.working_bytes,
                         f"{rep.saved_percent:.1f}% of the planned bytes saved"
                         if planner != "none" else "every tensor its own buffer"))
    return est


def _dtr(graph: Graph, device_gb: int) -> tuple[str, int | None, str]:
    """DTR simulated on a device of `device_gb`: its arena is what the weights, inputs and
    outputs leave."""
    label = f"DTR on {device_gb} GB"
    b = budget_bounds(graph)
    budget = device_gb * GB - b.external
    if budget <= 0:
        return label, None, (f"does not fit: the weights, inputs and outputs alone take "
                             f"{gb(b.external)}")
    if budget >= b.peak:
        return label, b.external + b.peak, "fits without evicting anything"
    if budget < b.lower:
        return label, None, (f"does not fit: needs at least {gb(b.external + b.lower)} "
                             "even recomputing everything")
    try:
        t = simulate(graph, budget=budget, options=DTR_OPTIONS)
    except (BudgetError, ThrashError) as e:
        return label, None, f"does not finish: {type(e).__name__} (sampled DTR, thrash limit 3)"
    return label, b.external + t.max_used, (f"{t.evictions} evictions, compute "
                                            f"x{t.overhead:.2f}")


def blog_check(name: str, inference: Estimate) -> list[str]:
    """The blog's figures beside minigraph's (inference), and where they cannot be right."""
    if name not in BLOG:
        return []
    base, pool, both = BLOG[name]
    none, ge = inference.bytes_of("no reuse"), inference.bytes_of("GE")
    ge_ip = inference.bytes_of("GE + in-place")
    lines = [f"  the GE blog: {base} GB without optimisation, {pool} GB with the pool"
             + (f", {both} GB with pool + in-place" if both else "")
             + f"; minigraph: {gb(none)}, {gb(ge)}, {gb(ge_ip)}"]
    floor = inference.bytes_of("theoretical minimum")
    best = 100 * (none - floor) / none if none else 0.0
    claim = 100 * (1 - pool / base)
    if inference.weights > pool * GB:
        lines.append(f"  cannot be right: the weights alone are {gb(inference.weights)} "
                     f"(float32), more than the blog's {pool} GB with the pool (no pool "
                     "reuses a weight; in float16 they are "
                     f"{gb(inference.weights // 2)})")
    if claim > best + 1:
        lines.append(f"  cannot be right: the blog saves {claim:.0f}%, but no plan can save "
                     f"more than {best:.0f}% of this run: the weights, inputs and outputs "
                     "are never reused and the live tensors at the peak must all be held")
    plans = [b for k, b, _ in inference.rows
             if k not in ("weights", "theoretical minimum", "no reuse") and
             not k.startswith("DTR") and b is not None]
    least = 100 * (none - max(plans)) / none if none and plans else 0.0
    if claim < least - 10:
        lines.append(f"  not what reuse saves: the blog's pool saves {claim:.0f}% of its "
                     f"baseline, every plan here saves at least {least:.0f}% of the same run "
                     "(an inference run frees each activation after its last reader, so "
                     "'30-50%' undersells reuse)")
    if abs(none - base * GB) > 0.5 * base * GB:
        lines.append(f"  the blog's {base} GB baseline is not this model's run: without "
                     f"reuse it takes {gb(none)} at these sizes (float32)")
    return lines

# %% [markdown]
# # 07 · Dynamic tensor rematerialisation (DTR)
#
# **Goal.** The static planners of lessons 03-06 place every tensor before the step runs.
# DTR does the opposite: it runs the step op by op under a *byte budget*, and when an
# output does not fit it **evicts** a resident tensor; if an evicted tensor is needed
# again, DTR **rematerialises** it by re-running the op that made it (and, recursively,
# whatever that op needs). Memory becomes compute. This lesson is DTR itself: what its
# budget counts, the runtime in one short file, the score that picks the victim (the
# paper's and MegEngine's), a sweep over budgets, and DTR against the static minimum.
# Lessons 07b, 07bb, 07c and 07e go beyond it (MegEngine's union-find, simrd's rules;
# fragmentation and compaction; Coop's layout; Checkmate, the portfolio, the default score).
#
# **Source.** The paper is [Kirisame 2021]: *Dynamic Tensor Rematerialization*, ICLR
# 2021; MegEngine's DTR [MegEngine 2021] for its score `eval_func` (section 5). **Read
# `minigraph/runtime/dtr/minimal.py`**: DTR in one short file, top to bottom - an ideal
# allocator, eviction by the lowest score, recursive recomputation, and the two scores of
# sections 4 and 5. The full runtime, `minigraph/runtime/dtr/runtime.py`, runs the same
# decisions with real addresses and research options (`DTROptions`); a test holds the two
# equal with those options off. The sweeps over budgets are an experiment:
# `minigraph/experiments/dtr.py`.

# %%
import math
import sys
from pathlib import Path

try:
    import minigraph as mg
except ModuleNotFoundError:          # a clone without `pip install -e .`: use the repo
    sys.path.insert(0, str(Path.cwd().parent))
    import minigraph as mg

import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Markdown, display
from matplotlib.ticker import FuncFormatter

from minigraph.examples import linear_chain, mlp_training
from minigraph.experiments.dtr import sweep
from minigraph.experiments.techniques import same_counting
from minigraph.feeds import random_feeds
from minigraph.graph import fmt_bytes
from minigraph.lessons import check_answers, l07
from minigraph.models import get_model
from minigraph.dtr_research import chen_sqrt
from minigraph.runtime.dtr import (
    HEURISTICS, DTRExecutor, DTROptions, DTRRuntime, TensorView, budget_bounds, get_heuristic,
    program_from_graph, run_minimal, simulate,
)
from minigraph.viz.plots import plot_dtr_timeline, plot_sweep


def show_table(header, rows):
    """Render rows (lists of cells) as a Markdown table under the cell."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    display(Markdown("\n".join(lines)))

# %% [markdown]
# ## 1. What the budget counts
#
# Every technique of this course counts bytes the same way (`minigraph/memory/
# footprint.py`; each word is defined once in `docs/glossary.md`):
#
# * the **arena** holds the planned tensors (activations and gradients);
# * the **workspace** is an op's scratch while it runs;
# * the bytes **outside** are the inputs, parameters and outputs: never reused, never
#   evicted;
# * **working memory** is arena + workspace. A static plan holds its whole arena and
#   takes each op's workspace beside it; DTR holds tensors and workspace in one range, and
#   its **budget** is the size of that range: working memory.

# %% [markdown]
# Two floors belong to a schedule, both without recomputation: the **theoretical minimum**
# (the most tensor bytes alive at one step: no arena is smaller) and the **working
# minimum** (at each step the bytes alive plus that op's workspace; the largest sum). No
# run that recomputes nothing - a static plan or DTR without evictions - holds less working
# memory than the working minimum. A DTR run below it has recomputed.
#
# DTR's own bounds, from its program: `peak`, the working memory a run without eviction
# reaches under its first-fit allocator (a little above the working minimum: first fit
# leaves holes); `lower`, the largest op (its inputs, outputs and workspace at once: no
# smaller budget can work); `safe`, a budget at which this runtime never gets stuck. A
# budget **ratio** follows the DTR paper: a fraction of the *total* peak, outside
# included, so `budget = ratio x (outside + peak) - outside` (`Bounds.arena_budget`, the
# one definition; `ratio_of="arena"` takes the fraction of `peak` alone).

# %%
model = get_model("transformer", layers=4, seq=64, d_model=64, batch=8)
step = model.graph
b = budget_bounds(step)
plain = mg.plan_memory(step, planner="bestfit")          # no in-place: as DTR runs
print(model.summary())
MiB = 2**20
print(f"theoretical minimum {plain.theoretical_minimum / MiB:.2f} MiB (arena)")
print(f"working minimum     {plain.working_minimum / MiB:.2f} MiB (arena + workspace); "
      f"DTR's Bounds.live {b.live / MiB:.2f} MiB: the same number")
print(f"DTR peak            {b.peak / MiB:.2f} MiB (no eviction, first fit)")
print(f"outside             {b.external / MiB:.2f} MiB; total peak {b.total / MiB:.2f} MiB")
print(f"lower {b.lower / MiB:.2f} MiB, safe {b.safe / MiB:.2f} MiB")
assert plain.working_minimum == b.live < b.peak
for of in ("total", "arena"):
    print(f"50% of the {of} peak -> a budget of {b.arena_budget(0.5, of) / MiB:.2f} MiB")
print("at 100% nothing is evicted:", simulate(step, ratio=1.0).evictions == 0)
try:
    simulate(step, b.lower - 1)
except mg.BudgetError as e:
    print("BudgetError:", str(e)[:90], "... minimum =", e.minimum)

# %% [markdown]
# ## 2. DTR in one file
#
# `run_minimal` (`minimal.py`) is the whole idea: walk the program; to run an op, make
# its inputs resident (recomputing evicted ones, recursively) and pin them; to place an
# output, evict the resident, unpinned tensor with the lowest score until it fits; when a
# tensor's last reader has run, release it. Below, an 8-layer MLP's training step at a
# budget between the smallest that could work and the run without eviction; then the full
# runtime with its extras off makes the same evictions (`tests/test_dtr_minimal.py`
# checks it on 200 random programs).

# %%
small = mlp_training(depth=8, width=32, batch=256)     # 8 layers, a training step
sb = budget_bounds(small)
budget = (sb.lower + sb.live) // 2
run = run_minimal(small, budget, score="dtr")
print(f"budget {budget:,} B (lower {sb.lower:,}, working minimum {sb.live:,}): "
      f"{len(run.evicted)} evictions, {run.replays} op replays, compute x{run.overhead:.3f}, "
      f"peak {run.peak:,} B")
print("first evictions:", run.evicted[:6])
TEXTBOOK = DTROptions(allocator="ideal", dead_first=False, protect=False, relief=False,
                      thrash_limit=math.inf, timeline=False)
full = DTRRuntime(program_from_graph(small), budget, options=TEXTBOOK).run()
assert (full.evicted, full.overhead) == (run.evicted, run.overhead)
print("the full runtime, extras off: the same evictions and compute")

# %% [markdown]
# ## 3. One step on real kernels
#
# `DTRExecutor` runs the kernels (NumPy here, CuPy on a GPU) with every planned tensor a
# view into one range of exactly the budget's bytes, placed by a first-fit allocator. The
# outputs are bit for bit those of the plain executor: recomputation replays the same
# kernels on the same inputs (dropout draws its mask from a counter-based generator keyed
# by node and step, so a replayed dropout draws the same mask). `check_remat=True` hashes
# each tensor when first computed and checks every recomputation against it. The
# summary's second line states how the ratio becomes the budget.

# %%
feeds = random_feeds(small)
reference = mg.Executor(small).run(feeds)
ex = DTRExecutor(small, ratio=0.8, heuristic="dtr", check_remat=True)
out = ex.run(feeds)
print("same outputs:", all(np.array_equal(out[k], reference[k]) for k in reference))
trace = ex.last_trace
print(trace.summary())
t = trace.peak + trace.external
assert trace.budget + trace.external == int(0.8 * t) and trace.max_used <= trace.budget


def clock_in_millions(ax):
    """The clock on x in millions of cost units (no "1e7" offset above the axis)."""
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1e6:g}"))
    ax.set_xlabel("clock (millions of cost units: FLOPs)")


clock_in_millions(plot_dtr_timeline(trace))       # bytes on y in KiB or MiB
plt.show()

# %% [markdown]
# Two kinds of release appear in the summary. When a tensor's last reader has run, DTR
# *fake deletes* it (MegEngine's `do_drop`): the bytes go back at once, but the record
# stays, because an evicted neighbour may need it to be recomputed. It is *really freed*
# when nothing that could need it is left. An *eviction* is the score's choice, made only
# when an output does not fit. Parameters, inputs, pinned tensors (the inputs of the
# running op) and the outputs of stateful ops (`sgd_update`) are never evicted, and
# stateful ops never re-run.
#
# ## 4. The uniform chain: where sqrt(n) comes from
#
# The DTR paper's first experiment: n forward unit ops, then n backward unit ops (each
# reads the gradient and one forward activation), every tensor one unit. Chen et al.'s
# static checkpointing keeps every (n/k)-th forward tensor, k *checkpoints*. The backward
# pass walks the segments from the last: it recomputes a segment of n/k tensors from its
# checkpoint, uses them, and drops them. At worst the k checkpoints and one segment are
# resident:
#
# $$M(k) = k + \frac{n}{k}, \qquad M'(k) = 1 - \frac{n}{k^2} = 0 \iff k = \sqrt{n},
# \qquad M(\sqrt{n}) = 2\sqrt{n},$$
#
# and every forward op but the checkpoints runs twice: about one extra forward pass, n
# extra ops on a base of 2n. The cell minimises M(k) by brute force and compares it with
# memonger's plan (`chen_sqrt`, the MXNet tool behind the paper).

# %%
UNIT = 4    # bytes of a one-element float32 tensor (alignment 1)
memonger = {}
for n in (100, 400):
    best_k = min(range(1, n + 1), key=lambda k: k + n / k)
    memonger[n] = plan = chen_sqrt(linear_chain(n), costs="unit", alignment=1)
    print(f"n = {n}: k = {best_k} checkpoints, M = {best_k + n / best_k:g} tensors "
          f"(2 sqrt(n) = {2 * math.sqrt(n):g}); memonger's plan: {plan.peak // UNIT} tensors, "
          f"compute x{plan.overhead:.2f} (one extra forward: x{1 + (n - best_k) / (2 * n):.2f})")
    assert best_k == math.isqrt(n) and plan.peak // UNIT == 2 * math.isqrt(n)

# %% [markdown]
# DTR is given no checkpoints, only the budget. Does it find that trade-off on its own?
# Least-recently-used eviction, at the same budgets:


# %%
def chain_compute(n, k, heuristic):
    """Compute overhead on linear_chain(n) with k*sqrt(n) unit tensors (inf: thrashed)."""
    try:
        return simulate(linear_chain(n), int(k * math.sqrt(n)) * UNIT, heuristic=heuristic,
                        costs="unit", alignment=1).overhead
    except mg.ThrashError:
        return math.inf


def cell(x):
    return "thrash" if math.isinf(x) else f"x{x:.3f}"


CASES = [(n, k) for n in (100, 400) for k in (2, 1)]
chain_rows = {case: {h: chain_compute(*case, h) for h in ("dtr", "lru")} for case in CASES}
show_table(["n", "budget", "dtr", "lru"],
           [[n, f"{k} sqrt(n)" if k > 1 else "sqrt(n)", cell(r["dtr"]), cell(r["lru"])]
            for (n, k), r in chain_rows.items()])
assert all(r["dtr"] < r["lru"] for r in chain_rows.values()), "DTR pays less than LRU"
for n in (100, 400):
    print(f"n = {n}: at 2 sqrt(n) DTR pays x{chain_rows[n, 2]['dtr']:.3f}, memonger's plan "
          f"x{memonger[n].overhead:.3f}; at sqrt(n) DTR {cell(chain_rows[n, 1]['dtr'])}")
assert all(not math.isinf(chain_rows[n, 1]["dtr"]) for n in (100, 400))

# %% [markdown]
# At 2 sqrt(n) DTR pays what memonger's plan pays, give or take (the lines under the
# table); at sqrt(n), below M(k) for every k, where no checkpointing plan of this shape
# fits, it still finishes. LRU pays more in every row (asserted).

# %% [markdown]
# The score DTR minimises (`minimal.py`, `h_dtr`) is
#
# $$h_{DTR}(t) = \frac{c_0(t) + e^*(t)}{\text{bytes}(t) \cdot \text{staleness}(t)}$$
#
# cheap to recompute, big, and not used for a long time means evict first. $c_0(t)$ is
# the cost of t's own producer; $e^*(t)$ is the cost of t's *evicted neighbourhood* (t's
# own cost not included): the evicted ancestors that recomputing t would need and the
# evicted descendants that would need t. Evicting t next to a long evicted run makes that
# run dearer, and $e^*$ charges it. The full runtime's heuristics read it as
# `t.neighbour_cost`; the paper's union-find approximation, `dtr-eqclass`, and others are
# compared in lesson 07b.

# %% [markdown]
# ## 5. MegEngine's score: `eval_func`
#
# MegEngine 1.4 [MegEngine 2021] scores a candidate with `TensorInfo::eval_func`, called by
# `find_best_tensor` with the parameters `(1.0, 1.0, 1.0, 1.0001)`:
#
# $$h_{MGE}(t) = \frac{(\text{cost} + 10^{-3})^{a} \cdot r^{\text{recompute\_times}}}
#   {\left(\frac{\text{memory} + \text{free\_mem}}{2^{20}}\right)^{b}\cdot
#   (\text{cur\_time} - \text{last\_used\_time} + 10^{-3})^{c}},\qquad a=b=c=1,\ r=1.0001$$
#
# * `cost` is `estimate_neighbor_cost(t)`: for each evicted *input of t's producer* and each
#   evicted *sibling output*, the cost of its union-find class (at least its own compute
#   time), summed. t's own compute time is **not** added;
# * `memory + free_mem`: t's bytes plus the free bytes right before and right after its
#   block (in MiB): evicting t next to a hole opens a bigger contiguous range;
# * `r^recompute_times` makes a tensor dearer each time it has been recomputed.
#
# `minimal.py`'s `eval_func` is this formula without `free_mem` (its allocator has no
# addresses); the full runtime's `megengine` heuristic has it all. Below, a run of
# `megengine` on an LSTM in a first-fit arena (compaction only as a last resort, so there
# are holes beside blocks) records the terms of each score; one decision where every term
# is non-zero is recomputed by hand.

# %%
A, B, C, R = 1.0, 1.0, 1.0, 1.0001     # the parameters find_best_tensor passes


def eval_func(cost, memory, free_mem, staleness, recompute_times):
    """MegEngine 1.4's TensorInfo::eval_func, term by term (memory in MiB)."""
    return ((cost + 1e-3) ** A * R ** recompute_times
            / (((memory + free_mem) / 2**20) ** B * (staleness + 1e-3) ** C))


scored = []
megengine = get_heuristic("megengine")


def megengine_watched(t, now):
    """The `megengine` score, with its terms recorded."""
    score = megengine(t, now)
    scored.append(dict(name=t.name, cost=t.megengine_cost, memory=t.size,
                       free_mem=t.free_left + t.free_right, staleness=now - t.last_access,
                       recompute_times=t.recomputes, score=score))
    return score


lstm = get_model("lstm", T=16, hidden=32, batch=256, input=16).graph
lstm_run = simulate(lstm, ratio=0.8, heuristic=megengine_watched, defrag="last-resort")
print(f"megengine on the LSTM at 80%: compute x{lstm_run.overhead:.3f}, "
      f"{len(scored)} scores computed for {lstm_run.evictions} evictions")
d = next(d for d in scored if d["cost"] > 0 and d["free_mem"] > 0 and d["recompute_times"] > 0)
by_hand = eval_func(d["cost"], d["memory"], d["free_mem"], d["staleness"], d["recompute_times"])
print(f"candidate {d['name']}: cost {d['cost']:g}, memory {d['memory'] / 2**10:g} KiB, "
      f"free_mem {d['free_mem'] / 2**10:g} KiB, staleness {d['staleness']:g}, "
      f"recompute_times {d['recompute_times']}")
print(f"  eval_func by hand {by_hand:.6g}, minigraph's megengine score {d['score']:.6g}")
assert math.isclose(by_hand, d["score"], rel_tol=1e-12)

# %% [markdown]
# ## 6. A sweep: every score at every budget
#
# The DTR paper's simulator treats memory as a counter: any free bytes can hold any
# tensor. `allocator="ideal"` does the same. A sweep runs each heuristic of `HEURISTICS`
# at each budget ratio of the total peak (costs are the ops' FLOP estimates, at least one
# unit per element written: a copy is not free). Each heuristic has its own colour and
# marker; a run that could not finish is a cross on the top row (stopped at 10x the base
# compute, or no room for an op).

# %%
RATIOS = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]
ideal = sweep(step, RATIOS, list(HEURISTICS), allocator="ideal")
ax = plot_sweep(ideal, title="transformer, ideal allocator (no fragmentation)")
plt.show()
ok = [r for r in ideal if r.status == "ok"]
lowest = {r: min((x for x in ok if x.ratio == r), key=lambda x: x.overhead, default=None)
          for r in RATIOS}
print("cheapest at each budget:", ", ".join(
    f"{r:.0%} {x.heuristic} x{x.overhead:.2f}" for r, x in lowest.items() if x))
print(f"the y axis reaches x{ax.get_ylim()[1]:.2f}, above the dearest finished run "
      f"(x{max(x.overhead for x in ok):.2f})")

# %% [markdown]
# ## 7. DTR against the static minimum, counted the same way
#
# Does DTR hold less than a plan that recomputes nothing? Only below the working minimum
# is that so. For a few graphs of the zoo and lesson 00's MLP: the floors, the best
# static plan (best-fit + in-place, its arena and its working memory), and the smallest
# budget at which DTR finishes (tried on a grid from `lower` to `peak`). The verdicts
# are written from the numbers (`benchmarks/same_counting.py` prints every zoo model).

# %%
from minigraph.lessons.l00 import mlp_step     # noqa: E402  (lesson 00's MLP)

graphs = {"zoo mlp": get_model("mlp").graph, "zoo transformer": get_model("transformer").graph,
          "zoo cnn": get_model("cnn").graph, "lesson 00 MLP": mlp_step()}
counted = {name: same_counting(g, name) for name, g in graphs.items()}
show_table(["graph", "theoretical minimum", "working minimum", "best static: arena (working)",
            "DTR smallest budget", "compute", "below the working minimum?"],
           [[n, fmt_bytes(c.theoretical_minimum), fmt_bytes(c.working_minimum),
             f"{fmt_bytes(c.static_arena)} ({fmt_bytes(c.static_working)})",
             fmt_bytes(c.dtr_budget), f"x{c.dtr_overhead:.2f}",
             f"yes, by {100 * (1 - c.dtr_budget / c.working_minimum):.0f}%" if c.below
             else "no"] for n, c in counted.items()])
for name, c in counted.items():
    room = c.working_minimum - c.dtr_lower
    print(f"{name}: the largest op alone needs {fmt_bytes(c.dtr_lower)}, "
          f"{100 * c.dtr_lower / c.working_minimum:.0f}% of the working minimum; "
          f"{fmt_bytes(max(room, 0))} left that eviction can win")
by_room = sorted(counted.values(), key=lambda c: c.dtr_lower / c.working_minimum)
below = [1 - c.dtr_budget / c.working_minimum for c in by_room]
assert below == sorted(below, reverse=True), "more room, further below"

# %% [markdown]
# DTR's budget can be compared with the *working* minimum only, not the theoretical one:
# it holds the workspace in its budget. Where the largest op alone is close to the working
# minimum (the last line for each graph), DTR has nothing left to evict and goes below it
# by little, whatever it pays: lesson 00's MLP, whose largest weight update holds its
# gradient and its scratch at once (lesson 00 prints both). Deeper graphs with many
# activations alive at the peak leave room, and there DTR goes further below, paying the
# compute in the table.

# %% [markdown]
# ## Exercises
#
# **1.** Write DTR's eviction loop. `my_place(dtr, nbytes)` makes room for `nbytes` in a
# `MinimalDTR` run `dtr` and counts them in: `dtr.used` (bytes resident), `dtr.budget`,
# `dtr.peak` (the most ever resident), `dtr.resident` (resident tensors that may be
# evicted), `dtr.pins[t]` (> 0 while the running op needs t), `dtr.score(dtr, t)` (lower:
# evict first), `dtr.evict(t)`, and `mg.BudgetError` when nothing is left to evict. Set
# `ANSWER_1 = my_place`; the check runs `MinimalDTR` with your loop on several programs
# and budgets and compares every eviction with `minimal.py`'s.
#
# **2.** Write an eviction score `my_score(t, now)` (lower = evict first; `t` is a
# `TensorView`: `t.size`, `t.cost`, `t.staleness`, `t.neighbour_cost`, `t.recomputes`,
# ...; see `heuristics.py`) and set `ANSWER_2 = my_score`. It passes when, on
# `linear_chain(200)` with sqrt(200) tensors of budget, it needs less compute than `lru`.
#
# **3.** Without running anything: what is `budget_bounds(linear_chain(n)).lower` in
# tensors (units), for any n >= 2? Put the number in `ANSWER_3`.

# %%
def my_place(dtr, nbytes):
    """Evict the lowest scores until `nbytes` fit, then count them in."""
    raise NotImplementedError      # replace this line: a loop of a few lines


def my_score(t: TensorView, now: float) -> float:
    raise NotImplementedError      # replace this line with your score


ANSWER_1 = None      # then: ANSWER_1 = my_place
ANSWER_2 = None      # then: ANSWER_2 = my_score
ANSWER_3 = None      # e.g. 2

# %%
check_answers({1: (ANSWER_1, l07.exercise_1), 2: (ANSWER_2, l07.exercise_2),
               3: (ANSWER_3, l07.exercise_3)})

# %% [markdown]
# ## Summary
#
# * DTR trades memory for compute at run time: evict when an output does not fit,
#   recompute (recursively) when an evicted tensor is needed. Results are unchanged, bit
#   for bit; stateful ops never run twice. `minimal.py` is the whole idea in one file.
# * The budget is working memory: the planned tensors and the running op's workspace in
#   one range. A ratio is of the total peak (outside included, as in the DTR paper);
#   `lower` is the largest single op, below which nothing can work.
# * The working minimum bounds every run that recomputes nothing; DTR goes below it only
#   by recomputing, and only as far as the largest op leaves room.
# * Chen's checkpointing needs 2 sqrt(n) tensors on a chain (minimise k + n/k); $h_{DTR}$
#   finds a comparable trade-off with no plan, LRU pays more.
# * MegEngine's `eval_func` scores with the evicted neighbours' classes, the free bytes
#   beside a block and a recompute penalty. Lessons 07b, 07bb and 07c: what lies beyond.

# %% [markdown]
# # 07 · Dynamic tensor rematerialisation (DTR)
#
# **Goal.** The static planners of lessons 03-06 place every tensor before the step runs.
# DTR does the opposite: it runs the step op by op under a *byte budget*, and when an
# output does not fit it **evicts** a resident tensor; if an evicted tensor is needed
# again, DTR **rematerialises** it by re-running the op that made it (and, recursively,
# whatever that op needs). Memory becomes compute. Here we run DTR on real kernels in one
# arena, compare its eviction heuristics, see why the *addresses* of free bytes matter
# (fragmentation), and put DTR next to Chen's sqrt(n) checkpointing and Checkmate's exact
# schedule.
#
# **Source.** MegEngine's DTR [MegEngine 2021] (`TensorInfo` and `ComputePath`, fake delete versus
# real delete, `auto_evict` and `find_best_tensor`, the union-find of evicted neighbours, the
# heuristic `eval_func` with recompute times and the free memory around a block: section 4)
# and Coop
# [Zhang 2023] (a sliding window over address-ordered tensors, cheap-tensor partitioning,
# recomputable in-place). The paper is [Kirisame 2021]:
# *Dynamic Tensor Rematerialization*, ICLR 2021. **Read `minigraph/runtime/dtr/minimal.py`**:
# DTR in one short file, top to bottom - an ideal allocator, eviction by the lowest score,
# recursive recomputation, and the two scores of sections 3 and 4 (h_DTR and MegEngine's
# `eval_func`). The runs below use the full runtime, `minigraph/runtime/dtr/runtime.py`
# (with `program.py`, `eviction.py`, `heuristics.py`); it adds a first-fit arena with real
# addresses and defragmentation, Coop's window and recomputable in-place, more scores and
# rules against thrashing, every switch a field of `DTROptions` (`options.py`), and a test
# holds it equal to `minimal.py` with those switched off. The sweeps over budgets are an
# experiment: `minigraph/experiments/dtr.py`.

# %%
import dataclasses
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
from minigraph.experiments.dtr import format_rows, sweep
from minigraph.feeds import random_feeds
from minigraph.lessons import check_answers, l07
from minigraph.models import get_model
from minigraph.runtime.dtr import (
    CHEAP_DENSITY,
    HEURISTICS,
    DTRExecutor,
    DTROptions,
    DTRRuntime,
    FirstFitArena,
    OpSpec,
    Program,
    TensorSpec,
    TensorView,
    budget_bounds,
    checkmate,
    chen_curve,
    generated_trace,
    get_heuristic,
    parse_trace,
    replay_trace,
    simulate,
)
from minigraph.runtime.dtr.heuristics import megengine
from minigraph.viz.plots import plot_dtr_timeline, plot_sweep


def show_table(header, rows):
    """Render rows (lists of cells) as a Markdown table under the cell."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    display(Markdown("\n".join(lines)))

# %% [markdown]
# ## 1. What the budget counts
#
# DTR's budget is the size of **one arena** holding the *planned* tensors (activations
# and gradients) plus the workspace of the op that is running - the same bytes
# `plan_memory` plans. Inputs, parameters and graph outputs live outside it, as in every
# earlier lesson (`external` bytes: never evicted). The numbers that frame every run:
#
# * `peak` - the arena this runtime needs *without* rematerialisation, under its own
#   first-fit allocator: the highest address a no-eviction run reaches, workspace
#   included. It is a little above `live`, the largest sum of live bytes, because first
#   fit leaves holes; using `live` would make "100% of the peak" already evict;
# * `total = external + peak` - the peak memory of the unmodified run, weights included;
# * `lower` - the largest single op: its inputs, outputs and workspace must be resident
#   together, so no smaller budget can work (DTR refuses one at once, `BudgetError`);
# * `safe` - a budget at which this runtime never gets stuck (it may still recompute too
#   much and stop with `ThrashError`; with `thrash_limit=math.inf` it always finishes), as
#   long as it may compact the arena: with `defrag="never"` scattered free bytes can stop
#   it below `peak`, with a `BudgetError` that says so.
#
# A budget *ratio* follows the DTR paper: a fraction of the **total** peak, so the arena
# gets `ratio * total - external` bytes (`ratio_of="total"`, the default). Since the
# weights cannot shrink, 50% of the total is less than 50% of the arena.
# `ratio_of="arena"` takes the fraction of the arena peak alone; tables say which.

# %%
model = get_model("transformer", layers=4, seq=64, d_model=64, batch=8)
step = model.graph
b = budget_bounds(step)
report = mg.plan_memory(step)
print(model.summary())
print(f"arena peak {b.peak / 2**20:.2f} MiB (live bytes {b.live / 2**20:.2f} MiB), "
      f"external {b.external / 2**20:.2f} MiB, total {b.total / 2**20:.2f} MiB")
print(f"lower {b.lower / b.peak:.2f} x arena peak, safe {b.safe / b.peak:.2f} x arena peak")
for of in ("total", "arena"):
    print(f"50% of the {of} peak -> an arena of {b.arena_budget(0.5, of) / 2**20:.2f} MiB")
assert b.live < b.peak, "first fit's holes put the arena peak above the live bytes"
assert b.arena_budget(0.5, "total") < b.arena_budget(0.5, "arena")
print("at 100% nothing is evicted:", simulate(step, ratio=1.0).evictions == 0)
print(f"plan_memory's theoretical minimum: {report.theoretical_minimum / 2**20:.2f} MiB "
      "(the peak without the running op's workspace)")
try:
    simulate(step, b.lower - 1)
except mg.BudgetError as e:
    print("BudgetError:", str(e)[:90], "... minimum =", e.minimum)

# %% [markdown]
# ## 2. One step on real kernels
#
# `DTRExecutor` runs the kernels (NumPy here, CuPy on a GPU) with every planned tensor a
# view into one arena of exactly the budget's bytes, placed by a first-fit allocator. The
# outputs are bit for bit those of the plain executor: recomputation replays the same
# kernels on the same inputs (dropout draws its mask from a counter-based generator keyed
# by node and step, so a replayed dropout draws the same mask). `check_remat=True` hashes
# each tensor when first computed and checks every recomputation against it.

# %%
small = mlp_training(depth=8, width=32, batch=256)     # 8 layers, a training step
feeds = random_feeds(small)
plain = mg.Executor(small).run(feeds)
ex = DTRExecutor(small, ratio=0.8, heuristic="dtr", check_remat=True)
out = ex.run(feeds)
print("same outputs:", all(np.array_equal(out[k], plain[k]) for k in plain))
trace = ex.last_trace
print(trace.summary())


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
# when nothing that could need it is left (MegEngine's `ref_cnt` reaching 0 in
# `recursive_free`). An *eviction* is the heuristic's choice, made only when an output
# does not fit. Parameters, inputs, pinned tensors (the inputs of the running op) and the
# outputs of stateful ops (`sgd_update`) are never evicted, and stateful ops never re-run.
#
# ## 3. The uniform chain: DTR's sqrt(n) behaviour
#
# The DTR paper's first experiment: n forward unit ops, then n backward unit ops (each
# reads the gradient and one forward activation), every tensor one unit. Chen et al.'s
# static checkpointing needs about 2*sqrt(n) tensors for one extra forward pass. DTR
# finds that trade-off on its own; least-recently-used does not.

# %%
UNIT = 4    # bytes of a one-element float32 tensor (alignment 1)


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

# %% [markdown]
# The score DTR minimises (`heuristics.py`, `dtr`) is
#
# $$h_{DTR}(t) = \frac{c_0(t) + e^*(t)}{\text{bytes}(t) \cdot \text{staleness}(t)}$$
#
# cheap to recompute, big, and not used for a long time means evict first. $e^*(t)$ is
# the cost of t's *evicted neighbourhood*: the evicted ancestors that recomputing t would
# need and the evicted descendants that would need t - evicting t next to a long evicted
# run makes that run dearer. The DTR paper approximates it with union-find classes of
# evicted tensors, $h_{DTR\text{-}eq}$ (`dtr-eqclass` here; MegEngine's own union-find is
# different: section 4); `dtr-local` drops it; `msps` (Capuchin) ignores staleness.
# `dtr-live` charges only what may still be recomputed: once a tensor's last reader has
# run it is released, but its record stays while a tensor computed from it might need
# it; the paper's $e^*$ charges such *dead* descendants to every neighbour, `dtr-live`
# only when a live evicted tensor lies beyond them. Neither is better everywhere: compare
# their lines in section 5's sweep, and the LSTM and Transformer rows of
# `benchmarks/RESULTS.md`.
#
# ## 4. MegEngine's score: `eval_func` and its union-find
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
# * `r^recompute_times` makes a tensor dearer each time it has been recomputed, so that
#   recomputation spreads over many tensors.
#
# This is the `megengine` heuristic (`heuristics.py`); `get_heuristic("megengine", a=...,
# b=..., c=..., r=...)` sets the parameters, `own_cost=True` adds t's own cost. Its
# union-find is not the one behind `dtr-eqclass`. The two, side by side:
#
# | | MegEngine 1.4 | minigraph `megengine` | minigraph `dtr-eqclass` |
# |---|---|---|---|
# | a class node | `DsuNode` (`parent`, summed time `t`) | `DSU` in `neighborhood.py` (`ScoreInputs.dsu_mge`) | a second `DSU` (`ScoreInputs.dsu_eq`) |
# | merged on eviction with | evicted producer inputs and sibling outputs (`update_dsu_after_evict`) | the same (`mge_neighbours`) | every evicted neighbour: inputs *and readers* (`Program.adj`) |
# | merged on fake delete | no: `free` calls `do_drop` without a merge | yes: a fake delete joins like an eviction | yes |
# | neighbour cost | per evicted input and sibling: max(class time, its own time), a class counted once per neighbour in it | the same (`ScoreInputs.megengine_cost`) | each distinct class of an evicted neighbour once (`eqclass_cost`) |
# | on recomputation | class time minus the tensor's time, then its node is reset to a root holding its own time alone (members whose path to the root passed through it now end there) | class cost minus the tensor's cost; the node is abandoned, the class stays whole; a new eviction gets a fresh node | the same as `megengine` |
# | score | $h_{MGE}$: no own cost, free neighbours, recompute penalty | $h_{MGE}$ | $h_{DTR}$ with e* from the classes: (c0 + classes) / (bytes x staleness) |
#
# MegEngine's time is measured kernel time; here `cost` and the clock are in the runtime's
# cost unit (FLOPs by default), so the $10^{-3}$ terms only matter when everything else is 0.
# Below, a run of `megengine` on an LSTM in a first-fit arena (compaction only as a last
# resort, so there are holes beside blocks: section 6) records the terms of each score it
# computes. One decision where every term is non-zero is recomputed by hand from
# `eval_func`; then the two union-finds are compared on the same candidates.

# %%
A, B, C, R = 1.0, 1.0, 1.0, 1.0001     # the parameters find_best_tensor passes


def eval_func(cost, memory, free_mem, staleness, recompute_times):
    """MegEngine 1.4's TensorInfo::eval_func, term by term (memory in MiB)."""
    return ((cost + 1e-3) ** A * R ** recompute_times
            / (((memory + free_mem) / 2**20) ** B * (staleness + 1e-3) ** C))


scored = []


def megengine_watched(t, now):
    """The `megengine` score, with its terms (and DTR-eq's class cost) recorded."""
    score = megengine(t, now)
    scored.append(dict(name=t.name, cost=t.megengine_cost, memory=t.size,
                       free_mem=t.free_left + t.free_right, staleness=now - t.last_access,
                       recompute_times=t.recomputes, eq=t.eqclass_cost, score=score))
    return score


lstm = get_model("lstm", T=16, hidden=32, batch=256, input=16).graph
run = simulate(lstm, ratio=0.8, heuristic=megengine_watched, defrag="last-resort")
print(f"megengine on the LSTM at 80%: compute x{run.overhead:.3f}, "
      f"{len(scored)} scores computed for {run.evictions} evictions")
d = next(d for d in scored if d["cost"] > 0 and d["free_mem"] > 0 and d["recompute_times"] > 0)
by_hand = eval_func(d["cost"], d["memory"], d["free_mem"], d["staleness"], d["recompute_times"])
print(f"candidate {d['name']}: cost {d['cost']:g}, memory {d['memory'] / 2**10:g} KiB, "
      f"free_mem {d['free_mem'] / 2**10:g} KiB, staleness {d['staleness']:g}, "
      f"recompute_times {d['recompute_times']}")
print(f"  eval_func by hand {by_hand:.6g}, minigraph's megengine score {d['score']:.6g}")
assert math.isclose(by_hand, d["score"], rel_tol=1e-12)

below = [d for d in scored if d["cost"] < d["eq"]]
above = [d for d in scored if d["cost"] > d["eq"]]
print(f"MegEngine's neighbour cost below DTR-eq's in {len(below)} of {len(scored)} scores, "
      f"above in {len(above)}")
d = max(below, key=lambda d: d["eq"] - d["cost"])
print(f"  the widest gap: {d['name']}, MegEngine's {d['cost']:g}, DTR-eq's {d['eq']:g} "
      "(the classes of its evicted readers)")

# %% [markdown]
# The gap comes from the readers: MegEngine's neighbours are t's producer's inputs and
# sibling outputs, so an evicted tensor that *reads* t (and would need t to be recomputed)
# costs t nothing. Does that matter? On the chain of section 3, compare `megengine` with
# the same `eval_func` fed DTR-eq's classes instead (`mge with eq classes`): only the
# neighbour cost differs between the two columns.

# %%
def megengine_eq_classes(t, now):
    """eval_func with the DTR paper's union-find classes (inputs and readers) as its cost."""
    return eval_func(t.eqclass_cost, t.size, t.free_left + t.free_right,
                     now - t.last_access, t.recomputes)


variants = {"dtr": "dtr", "dtr-eqclass": "dtr-eqclass", "megengine": "megengine",
            "megengine, own cost": get_heuristic("megengine", own_cost=True),
            "mge with eq classes": megengine_eq_classes}
mge_rows = {case: {k: chain_compute(*case, h) for k, h in variants.items()} for case in CASES}
show_table(["n", "budget", *variants],
           [[n, f"{k} sqrt(n)" if k > 1 else "sqrt(n)", *(cell(r[v]) for v in variants)]
            for (n, k), r in mge_rows.items()])
assert all(r["megengine"] > r["dtr"] for r in mge_rows.values())
assert all(r["mge with eq classes"] < r["megengine"] for r in mge_rows.values())

# %% [markdown]
# On this chain `megengine` pays more than `dtr` in every row, and adding its own cost
# does not help; giving the same formula the classes of readers as well closes the gap
# (the last column; both claims are asserted in the cell). MegEngine's free-memory term
# can only matter where blocks have holes beside them: the LSTM of section 6.
#
# ## 5. The heuristics, in the DTR paper's world
#
# The DTR paper's simulator treats memory as a counter: any free bytes can hold any
# tensor. Our `allocator="ideal"` does the same. A sweep runs each heuristic at each budget
# ratio of the total peak (costs are the ops' FLOP estimates, at least one unit per
# element written: a copy is not free); `thrash` marks runs stopped at 10x the base
# compute, `budget` runs that could not place a tensor.

# %%
RATIOS = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]
ideal = sweep(step, RATIOS, list(HEURISTICS), allocator="ideal")
plot_sweep(ideal, title="transformer, ideal allocator (no fragmentation)", ymax=1.6)
plt.show()

# %% [markdown]
# The score is half of DTR; the runtime's rules are the other half. The DTR authors'
# simulator, simrd [Kirisame 2021], runs its scores under rules of its own (listed in
# `minigraph/runtime/dtr/simrd.py`): a view belongs to its base's storage and is re-run
# when that storage comes back; an op locks its resident inputs before rematerialising
# the others; a multi-output op needs room for all its outputs; a released tensor is
# evicted at once and still counts in its neighbours' evicted neighbourhoods; a dead
# tensor brought back is scored like any other; ties go to the last candidate.
# `DTROptions.simrd(h)` replays a trace with those rules (`benchmarks/dtr_reference.py`
# compares it with simrd itself, cell by cell). One of this runtime's own rules is
# `dead_first`: a dead tensor brought back by a neighbour's recomputation is evicted
# before any live one. A generated LSTM-like training trace (`generated_trace`: views,
# multi-output ops, an optimizer's in-place update of constants), replayed at the same
# bytes (the authors' budget: a ratio of the baseline peak, constants included) with
# simrd's rules and with ours, with and without `dead_first`:

# %%
log = parse_trace(generated_trace("lstm", 6), name="lstm-6")
RULES = {"simrd's rules": DTROptions.simrd("dtr"),
         "ours": DTROptions(allocator="ideal"),
         "ours, dead_first=False": DTROptions(allocator="ideal", dead_first=False)}
rule_rows = {}
for r in (0.7, 0.5, 0.4):
    for label, o in RULES.items():
        try:
            rule_rows[r, label] = f"x{replay_trace(log, ratio=r, options=o).overhead:.3f}"
        except mg.ThrashError:
            rule_rows[r, label] = "thrash"
        except mg.BudgetError:
            rule_rows[r, label] = "out of memory"
show_table(["ratio", *RULES], [[r, *(rule_rows[r, k] for k in RULES)] for r in (0.7, 0.5, 0.4)])
assert any(rule_rows[r, "simrd's rules"] != rule_rows[r, "ours, dead_first=False"]
           for r in (0.7, 0.5, 0.4))

# %% [markdown]
# The score formula is the same h_DTR in every column; where the columns differ, the
# rules make the difference, and switching off `dead_first` alone does not give simrd's
# column (asserted in the cell).

# %% [markdown]
# ## 6. Memory is not a commodity: fragmentation
#
# A real arena has addresses. When an output needs S bytes, first fit wants *one* free
# block of S bytes; free bytes scattered in holes do not add up (lesson 09). DTR's score
# does not look at addresses, so it may evict tensor after tensor that frees bytes in the
# wrong places: **fragmentation-forced evictions** (evictions although the free bytes
# already sufficed). MegEngine's `eval_func` divides by (bytes + free bytes left and
# right of the block): a tensor next to a hole frees a bigger contiguous range. Coop
# slides a window over the arena in address order and evicts the contiguous run of
# tensors and holes that frees enough bytes at the lowest summed cost: each decision opens
# one hole big enough, where a per-tensor score may first evict tensors in the wrong
# places. To see this, we switch off compaction until nothing else is left
# (`defrag="last-resort"`; the default is MegEngine's, below).

# %%
frag = sweep(lstm, [0.9, 0.8, 0.7], ["dtr", "lru", "megengine", "coop"],
             defrag="last-resort")
compacting = sweep(lstm, [0.9, 0.8, 0.7], ["dtr"], defrag="first")
for r in compacting:
    r.heuristic = "dtr + defrag"
display(Markdown(format_rows(frag + compacting)))
forced = {}
for r in frag + compacting:
    if r.status == "ok":
        e, f = forced.get(r.heuristic, (0, 0))
        forced[r.heuristic] = (e + r.evictions, f + r.frag_forced)
show_table(["heuristic", "evictions (runs that finished)", "fragmentation-forced"],
           [[h, e, f"{f} ({f / e:.0%})" if e else "0"] for h, (e, f) in forced.items()])
assert forced["dtr + defrag"][1] == 0, "with compaction no eviction is forced"
assert all(forced[h][1] > 0 for h in ("dtr", "megengine", "coop")), \
    "scores, MegEngine's free-neighbour term and Coop's windows all make forced evictions"

# %% [markdown]
# `fragmentation` is Coop's measure: the free bytes (as a fraction of the budget) at each
# eviction decision, averaged - bytes that were free but in the wrong place. An eviction
# is *fragmentation-forced* when, at its decision, the free bytes already added up to the
# request. The second table sums them per heuristic. Coop's window does not make them
# disappear: when the free bytes already sufficed, every tensor of the window it evicts
# is counted as forced - each one is part of the hole it opens, but a compacting allocator
# would have needed none of them. Compare the heuristics budget by budget in the first
# table. MegEngine also *compacts* the arena when
# fragmentation blocks an allocation ([MegEngine 2021]: since v1.7 defragmentation is on by
# default, "when memory is short and fragmented, the fragments are merged"). That is this
# runtime's default, `defrag="first"`: no eviction is then forced by fragmentation (the
# `dtr + defrag` rows, asserted), at the price of copying the resident tensors
# (`trace.moved_bytes`), and the eviction decisions are those of the ideal allocator.
#
# Wasted evictions are not only wasted: an evicted tensor may be needed again, and its
# recomputation allocates again, into the same fragmented arena. A convolution's im2col
# workspace is a large contiguous request; on a small ResNet, compare the compute paid
# without and with compaction:

# %%
resnet = get_model("resnet", depth=18, image=32, batch=8, width=8).graph
for defrag in ("last-resort", "first"):
    rows = sweep(resnet, [0.8], ["dtr", "coop"], defrag=defrag)
    print(f"defrag={defrag!r}: " + ", ".join(
        f"{r.heuristic} {r.status}" + (f" x{r.overhead:.3f}" if r.overhead else "")
        for r in rows))

# %% [markdown]
# A picture of the problem, on a tiny arena: five tensors, two of them freed, a small one
# allocated since, then an output larger than any free block. Which eviction opens a hole
# big enough depends on what lies beside each block, not only on its size.

# %%
REQUEST = 50
arena = FirstFitArena(100)
blocks = {k: arena.alloc(20, k) for k in "abcde"}
arena.free(blocks["b"])
arena.free(blocks["d"])
arena.alloc(10, "x")
print("blocks (offset, bytes, owner):", list(arena.blocks()))
holes = [size for _, size, owner in arena.blocks() if owner is None]
print(f"holes of {' and '.join(map(str, holes))} bytes: {arena.free_bytes} free, the largest "
      f"free block {arena.largest_free()} -> a {REQUEST}-byte output does not fit")
assert holes == [10, 20] and REQUEST > arena.largest_free()
for k in "ace":
    left, right = arena.free_around(blocks[k])
    print(f"evict {k}: frees {20 + left + right} contiguous bytes "
          f"(MegEngine's memory + free_mem for {k})")

# %% [markdown]
# ## 7. Coop's layout: cheap tensors side by side, in place but recomputable
#
# Coop [Zhang 2023] pairs its window with two changes to *where* tensors lie; both are
# options of any heuristic here.
#
# **Cheap-tensor partitioning** (`DTROptions(partition=True)`). Coop sorts tensors by
# *cost density*, the compute that made them over their bytes: super-linear ops (matmul,
# convolution) are about an order of magnitude denser than element-wise ones. Cheap
# tensors are allocated from the bottom of the arena, the others from the top
# (`PartitionedArena` in `allocator.py`; a tensor is cheap below `CHEAP_DENSITY` cost units
# per byte). A chain alternates cheap and dear tensors; first fit lays them out in that
# order, and every window of neighbours then holds a dear one. Below, a hand-written
# program (the runtime's plain input, `program.py`): `a` and `c` cost 10 for 100 bytes,
# `b` and `d` 1000, and `e` needs 200 bytes of a 400-byte arena that `a`..`d` fill. The
# window sums each tensor's own cost only, so the sums can be checked by hand.

# %%
def hand_program(sizes, ops, steps):
    """A program by hand: `sizes` tensor -> bytes (0: outside the arena), `ops` as
    (name, inputs, outputs, cost, in-place pairs (output, input)), `steps` in order."""
    names = list(sizes)
    ix = {n: k for k, n in enumerate(names)}
    made_by = {o: k for k, (_, _, outs, _, _) in enumerate(ops) for o in outs}
    tensors = [TensorSpec(n, sizes[n], sizes[n] == 0, made_by.get(n, -1)) for n in names]
    specs = [OpSpec(name, tuple(ix[i] for i in ins), tuple(ix[o] for o in outs), cost,
                    inplace=tuple((ix[y], ix[x]) for y, x in pairs))
             for name, ins, outs, cost, pairs in ops]
    return Program(tensors, specs, [(s, ix[t] if s == "release" else t) for s, t in steps])


def layout(rt):
    """(offset, bytes, tensor) of every block in use, in address order."""
    return [(at, n, rt.program.tensors[o].name) for at, n, o in rt.arena.blocks()
            if o is not None]


sizes = dict(x=0, a=100, b=100, c=100, d=100, e=200)
chain = [("A", ["x"], ["a"], 10.0, []), ("B", ["a"], ["b"], 1000.0, []),
         ("C", ["b"], ["c"], 10.0, []), ("D", ["c"], ["d"], 1000.0, []),
         ("E", ["d"], ["e"], 1.0, [])]
cost_of = {outs[0]: c for _, _, outs, c, _ in chain}
own_cost = {"cost": lambda t, now: t.cost}
before, evicted = {}, {}
for partition in (False, True):
    opts = dict(heuristic_args=own_cost, defrag="last-resort", partition=partition)
    first4 = DTRRuntime(hand_program(sizes, chain[:4], [("call", k) for k in range(4)]),
                        400, "coop", **opts)
    first4.run()
    before[partition] = layout(first4)
    tr = DTRRuntime(hand_program(sizes, chain, [("call", k) for k in range(5)]), 400,
                    "coop", **opts).run()
    evicted[partition] = tr.evicted
    print(f"partition={partition}: before E {[(at, t) for at, _, t in before[partition]]}; "
          f"the window evicts {tr.evicted}, cost {sum(cost_of[t] for t in tr.evicted):g}")
print(f"cheap below {CHEAP_DENSITY} cost units per byte: a and c "
      f"({10 / 100} per byte) are cheap, b and d ({1000 / 100} per byte) are not")
assert [t for _, _, t in before[False]] == ["a", "b", "c", "d"]
assert [t for _, _, t in before[True]] == ["a", "c", "d", "b"]
assert evicted[False] == ["a", "b"] and evicted[True] == ["a", "c"]

fig, ax = plt.subplots(figsize=(7, 1.6))
for row, partition in enumerate((True, False)):
    for at, n, t in before[partition]:
        dear = cost_of[t] / n >= CHEAP_DENSITY
        ax.broken_barh([(at, n)], (row - 0.35, 0.7), color="#c0504d" if dear else "#9bbb59",
                       edgecolor="white")
        ax.text(at + n / 2, row, t + (" (evicted)" if t in evicted[partition] else ""),
                ha="center", va="center", fontsize=8)
ax.set_yticks([0, 1], ["partitioned", "first fit"])
ax.set_xlim(0, 400)
ax.set_xlabel("address (bytes); green: cheap, red: dear")
ax.set_title("the arena when E asks for 200 bytes, and the window's victims", fontsize=9)
plt.show()

# %% [markdown]
# First fit leaves every pair of neighbours with one dear tensor in it (`d` is `E`'s
# input, pinned), so the cheapest window costs a dear tensor plus a cheap one. The
# partitioned arena has put `a` and `c` side by side at the bottom: the window evicts the
# two cheap ones, and both dear tensors stay (the printed costs).
#
# **Recomputable in-place** (`DTROptions(recomputable_inplace=True)`). DTR runs every op
# out of place: `b = relu(a)` gets a second block while `a` is still resident, and `a`'s
# block becomes a hole a moment later. An in-place kernel could write `b` over `a`, but
# then `a` is gone, and DTR may need it again to recompute something evicted. Coop
# records the in-place op instead: `b` takes `a`'s block and `a` is marked evicted, so
# a recomputation that needs `a` re-runs `a`'s producer (`coop_inplace.py`; the pairs come
# from the ops' in-place declarations and the rules of lesson 03, checked in `program.py`).
# Coop's paper also lays out the parameters, whose updates are in place, at the ends of
# the arena; here parameters live outside the arena, so only the activations are left.
# Below, `z` (dear) and `a` fill a 200-byte arena when `relu` runs.

# %%
sizes2 = dict(x=0, z=100, a=100, b=100, y=0)
ops2 = [("H", ["x"], ["z"], 1000.0, []), ("F", ["x"], ["a"], 10.0, []),
        ("R", ["a"], ["b"], 1.0, [("b", "a")]), ("K", ["z", "b"], ["y"], 1.0, [])]
steps2 = [("call", 0), ("call", 1), ("call", 2), ("release", "a"), ("call", 3),
          ("release", "z"), ("release", "b")]
runs = {}
for inplace in (False, True):
    runs[inplace] = t = DTRRuntime(hand_program(sizes2, ops2, steps2), 200, "dtr",
                                   recomputable_inplace=inplace).run()
    print(f"recomputable_inplace={inplace}: evicted {t.evicted}, extra compute "
          f"{t.extra_cost:g}, outputs written over their input: {t.inplace}")
assert runs[False].evicted == ["z"] and runs[False].extra_cost == 1000
assert runs[True].evicted == [] and runs[True].extra_cost == 0 and runs[True].inplace == 1

# %% [markdown]
# Out of place, `relu` needs a block while `a` is pinned, so `z` is evicted and recomputed
# for `K` at the price of its producer; in place, nothing moves. On section 6's LSTM, with
# compaction off, the counts of each idea alone and together (simulated; a real run makes
# the same decisions, checked below):

# %%
variants = [("dtr", {}), ("dtr + in-place", dict(recomputable_inplace=True)),
            ("coop (window only)", {}), ("coop + partition", dict(partition=True)),
            ("coop + in-place", dict(recomputable_inplace=True)),
            ("coop + partition + in-place", dict(partition=True, recomputable_inplace=True))]
counts = {}
for shown, opts in variants:
    t = simulate(lstm, ratio=0.8, heuristic=shown.split()[0], defrag="last-resort",
                 timeline=False, **opts)
    counts[shown] = (t.evictions, t.frag_forced_evictions, t.overhead, t.inplace)
show_table(["variant (LSTM, 0.8 of total, defrag last-resort)", "evictions",
            "fragmentation-forced", "compute", "written in place"],
           [[k, e, f, f"x{o:.3f}", n] for k, (e, f, o, n) in counts.items()])
forced_of = {k: v[1] for k, v in counts.items()}
window = forced_of["coop (window only)"]
assert window < forced_of["dtr"]
assert forced_of["dtr + in-place"] < forced_of["dtr"] and forced_of["coop + in-place"] < window
assert counts["coop + partition"][0] > counts["coop (window only)"][0]
assert counts["coop + partition"][2] > counts["coop (window only)"][2]
assert forced_of["coop + partition + in-place"] == min(forced_of.values())

ex = DTRExecutor(lstm, ratio=0.8, heuristic="coop", defrag="last-resort", partition=True,
                 recomputable_inplace=True, check_remat=True)
lstm_feeds = random_feeds(lstm)
out, ref = ex.run(lstm_feeds), mg.Executor(lstm).run(lstm_feeds)
assert all(np.array_equal(out[k], ref[k]) for k in ref) and not ex.last_trace.remat_mismatches
assert ex.simulate().events == ex.last_trace.events
print(f"real run, coop + partition + in-place: {ex.last_trace.frag_forced_evictions} "
      f"forced evictions, outputs bitwise equal to the plain executor's")

# %% [markdown]
# At this budget the window alone makes fewer forced evictions than `dtr`, in-place
# lowers the count for `dtr` and for `coop`, the partition alone raises the evictions
# (and the compute with them), and the two layout ideas together make the fewest forced
# evictions of all (each asserted above). So the partition is no free win: the two regions of a partitioned
# arena grow towards each other, and where they meet a window may have to take dear
# tensors too. Here it pays off only together with in-place (with a partition, a
# hand-over is taken only within one class, so it never brings a cheap tensor into the
# dear region). `python benchmarks/dtr.py --coop` runs the same variants in real mode on the zoo
# models at two tighter budgets (its table is in `benchmarks/RESULTS.md`): read the rows
# side by side before trusting either idea on your model.

# %% [markdown]
# ## 8. DTR, sqrt(n) and Checkmate on one plot
#
# Static rematerialisation decides everything before the run. `chen_curve` is Chen et
# al.'s sqrt(n) checkpointing as MXNet's memonger does it (keep an op's output each time
# the running sum of forward bytes passes a threshold; recompute the rest once in the
# backward pass), over many thresholds. `checkmate` solves Checkmate's MILP [Jain 2020]
# for the cheapest recomputation schedule within a budget - exact when the solver proves
# it within its time limit, and only for small graphs. A schedule the solver found but
# could not prove optimal in time is drawn with its own marker and label (how far the
# solver gets depends on the machine: the table says what it proved here). All three use
# the same cost model and the same byte accounting.

# %%
tiny = linear_chain(10)
kw = dict(costs="unit", alignment=1)
dtr_rows = sweep(tiny, [1.0, 0.8, 0.6, 0.5, 0.4, 0.3], ["dtr", "lru"], **kw)
static = chen_curve(tiny, **kw)
versus = []
for ratio, limit in ((0.7, 10), (0.6, 10), (0.5, 5)):
    budget = budget_bounds(tiny, **kw).arena_budget(ratio)
    at_budget = simulate(tiny, budget, heuristic="dtr", **kw).overhead
    try:
        opt = checkmate(tiny, budget, time_limit=limit, **kw)
    except mg.BudgetError:           # the solver found no schedule before its time limit
        versus.append([f"{ratio:.0%}", budget, f"none found in {limit} s", "-",
                       f"x{at_budget:.3f}"])
        continue
    if not opt.optimal:
        opt = dataclasses.replace(opt, method="checkmate, stopped at its time limit")
    static.append(opt)
    versus.append([f"{ratio:.0%}", budget, "proven optimal" if opt.optimal else
                   f"best found in {limit} s, not proven", f"x{opt.overhead:.3f}",
                   f"x{at_budget:.3f}"])
    if opt.optimal:
        assert opt.overhead <= at_budget + 1e-9, "nothing beats a proven optimum"
show_table(["budget (of total)", "arena bytes", "Checkmate", "its compute", "DTR's compute"],
           versus)
plot_sweep(dtr_rows, static=static, title="chain of 10 + 10 unit ops")
plt.show()

# %% [markdown]
# Checkmate knows the whole future; DTR only the past. The table compares them at the
# same budgets: where the solver proved its schedule optimal, that is the least compute
# any schedule can pay, and DTR's column says how far it is from it. DTR never needed the
# graph in advance.
#
# ## Exercises
#
# **1.** Write an eviction heuristic `my_score(t, now)` (lower = evict first; `t` is a
# `TensorView`: `t.size`, `t.cost`, `t.staleness`, `t.neighbor_cost`, `t.recomputes`,
# `t.free_left`, ...) and set `ANSWER_1 = my_score`. It passes when, on `linear_chain(200)`
# with sqrt(200) tensors of budget, it needs less compute than `lru`.
#
# **2.** The arena printed below holds five tensors and two holes. Which single tensor
# would you evict so that an output of `l07.REQUEST_2` bytes fits? Put its name in
# `ANSWER_2` (`arena2.free_around(offset)` gives the free bytes left and right of a block).
#
# **3.** Without running anything: what is `budget_bounds(linear_chain(n)).lower` in
# tensors (units), for any n >= 2? Put the number in `ANSWER_3`.

# %%
arena2, offsets2 = l07.exercise_2_arena()
print("exercise 2's arena (offset, bytes, owner):", list(arena2.blocks()),
      f"- the output needs {l07.REQUEST_2} bytes")


def my_score(t: TensorView, now: float) -> float:
    raise NotImplementedError      # replace this line with your score


ANSWER_1 = None      # then: ANSWER_1 = my_score
ANSWER_2 = None      # e.g. "p"
ANSWER_3 = None      # e.g. 2

# %%
check_answers({1: (ANSWER_1, l07.exercise_1), 2: (ANSWER_2, l07.exercise_2),
               3: (ANSWER_3, l07.exercise_3)})

# %% [markdown]
# ## Summary
#
# * DTR trades memory for compute at run time: evict when an output does not fit,
#   recompute (recursively, with an explicit stack) when an evicted tensor is needed.
#   Results are unchanged, bit for bit; stateful ops never run twice.
# * The budget counts the same planned bytes as the static plans; `lower` is the largest
#   single op, below which nothing can work. Ratios are of the total peak (weights
#   included, as in the DTR paper) unless `ratio_of="arena"`; the peak is the runtime's
#   own no-eviction arena under first fit, so 100% never evicts.
# * The heuristic matters: $h_{DTR}$ (cost over bytes times staleness, with the evicted
#   neighbourhood) finds sqrt(n)-style checkpointing on a chain on its own; LRU pays more
#   compute at every budget of section 3's table.
# * MegEngine's `eval_func` adds the free bytes beside a block and a recompute penalty, and
#   estimates the neighbourhood with a union-find over the producer's inputs and sibling
#   outputs only (`megengine`); the DTR paper's classes also take in the readers
#   (`dtr-eqclass`), which is what the chain rewards.
# * Real memory has addresses. Evictions made while the free bytes already sufficed are
#   fragmentation-forced; a per-tensor score, MegEngine's free-neighbour term and Coop's
#   contiguous windows all still make them; compaction (MegEngine's default) removes them.
# * Coop also changes the layout: cheap tensors from the bottom of the arena and dear ones
#   from the top (`partition=True`), and an in-place op whose overwritten input stays
#   recomputable (`recomputable_inplace=True`). On the LSTM, in-place lowers the forced
#   evictions, the partition alone raises them, and the two together lower them most;
#   the benchmark's other models and budgets show that neither wins everywhere.
# * Static plans (sqrt(n), Checkmate's MILP) need the whole graph in advance; DTR needs
#   only the past. Checkmate is optimal only where the solver proves it in time.

# %% [markdown]
# # 07 · Dynamic tensor rematerialisation (DTR)
#
# **Goal.** The static planners of lessons 03-06 place every tensor before the step runs.
# DTR does the opposite: it runs the step op by op under a *byte budget*, and when an
# output does not fit it **evicts** a resident tensor; if an evicted tensor is needed
# again, DTR **rematerialises** it by re-running the op that made it (and, recursively,
# whatever that op needs). Memory becomes compute. Here we run DTR on real kernels in one
# arena, compare its eviction heuristics, see why the *addresses* of free bytes matter
# (fragmentation), and put DTR next to Chen's sqrt(n) checkpointing and the optimum.
#
# **Source.** MegEngine's DTR [MegEngine 2021] (`TensorInfo` and `ComputePath`, fake delete versus
# real delete, `auto_evict` and `find_best_tensor`, the union-find of evicted neighbours, the
# heuristic `eval_func` with recompute times and the free memory around a block) and Coop
# [Zhang 2023] (a sliding window over address-ordered tensors). The paper is [Kirisame 2021]:
# *Dynamic Tensor Rematerialization*, ICLR 2021. The code is `minigraph/runtime/dtr/` - read
# `program.py`, `runtime.py` (the state machine), `eviction.py` (which tensor goes) and
# `heuristics.py` (the scores); every switch is a field of `DTROptions` (`options.py`). The
# sweeps over budgets are an experiment: `minigraph/experiments/dtr.py`.

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

from minigraph.examples import linear_chain, mlp_training
from minigraph.experiments.dtr import format_rows, sweep
from minigraph.feeds import random_feeds
from minigraph.models import get_model
from minigraph.runtime.dtr import (
    HEURISTICS,
    DTRExecutor,
    FirstFitArena,
    TensorView,
    budget_bounds,
    checkmate,
    chen_curve,
    simulate,
)
from minigraph.viz.plots import plot_dtr_timeline, plot_sweep

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
#   much and stop with `ThrashError`; with `thrash_limit=math.inf` it always finishes).
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
plot_dtr_timeline(trace)
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
print(f"{'n':>6} {'budget':>12} {'dtr':>8} {'lru':>8}")
for n in (100, 400):
    chain = linear_chain(n)
    for k, label in ((2, "2 sqrt(n)"), (1, "sqrt(n)")):
        budget = int(k * math.sqrt(n)) * UNIT
        res = {}
        for h in ("dtr", "lru"):
            try:
                res[h] = f"x{simulate(chain, budget, heuristic=h, costs='unit', alignment=1).overhead:.3f}"
            except mg.ThrashError:
                res[h] = "thrash"
        print(f"{n:>6} {label:>12} {res['dtr']:>8} {res['lru']:>8}")

# %% [markdown]
# The score DTR minimises (`heuristics.py`, `dtr`) is
#
# $$h_{DTR}(t) = \frac{c_0(t) + e^*(t)}{\text{bytes}(t) \cdot \text{staleness}(t)}$$
#
# cheap to recompute, big, and not used for a long time means evict first. $e^*(t)$ is
# the cost of t's *evicted neighbourhood*: the evicted ancestors that recomputing t would
# need and the evicted descendants that would need t - evicting t next to a long evicted
# run makes that run dearer. MegEngine approximates it with a union-find (`dtr-eqclass`
# here); `dtr-local` drops it; `msps` (Capuchin) ignores staleness. `dtr-live` charges
# only what may still be recomputed: once a tensor's last reader has run it is released,
# but its record stays while a tensor computed from it might need it; the paper's $e^*$
# charges such *dead* descendants to every neighbour, `dtr-live` only when a live evicted
# tensor lies beyond them. Neither is better everywhere: compare their rows below, and
# the LSTM and Transformer rows of `benchmarks/RESULTS.md`.
#
# ## 4. The heuristics, in the DTR paper's world
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
# The score is half of DTR; the runtime's rules are the other half. One of this
# runtime's: a *dead* tensor (its last reader has run) that comes back because a
# neighbour's recomputation needed it stays resident while memory allows, and under
# pressure it is evicted before any live tensor (`dead_first=True`). The DTR authors'
# simulator scores it like any other tensor (`benchmarks/dtr_reference.py` replays our
# traces in it). The same `dtr` score, with and without that rule:

# %%
for r in (0.6, 0.5, 0.4):
    cells = []
    for dead_first in (True, False):
        try:
            tr = simulate(step, ratio=r, allocator="ideal", dead_first=dead_first,
                          timeline=False)
            cells.append(f"x{tr.overhead:.3f}")
        except mg.ThrashError:
            cells.append("thrash")
    print(f"ratio {r}: dead first {cells[0]}, scored like the rest {cells[1]}")

# %% [markdown]
# ## 5. Memory is not a commodity: fragmentation
#
# A real arena has addresses. When an output needs S bytes, first fit wants *one* free
# block of S bytes; free bytes scattered in holes do not add up (lesson 09). DTR's score
# does not look at addresses, so it may evict tensor after tensor that frees bytes in the
# wrong places: **fragmentation-forced evictions** (evictions although the free bytes
# already sufficed). MegEngine's `eval_func` divides by (bytes + free bytes left and
# right of the block): a tensor next to a hole frees a bigger contiguous range. Coop
# slides a window over the arena in address order and evicts the contiguous run of
# tensors and holes that frees enough bytes at the lowest summed cost: every eviction it
# makes is used. To see this, we switch off compaction until nothing else is left
# (`defrag="last-resort"`; the default is MegEngine's, below).

# %%
lstm = get_model("lstm", T=16, hidden=32, batch=256, input=16).graph
frag = sweep(lstm, [0.9, 0.8, 0.7], ["dtr", "lru", "megengine", "coop"],
             defrag="last-resort")
compacting = sweep(lstm, [0.9, 0.8, 0.7], ["dtr"], defrag="first")
for r in compacting:
    r.heuristic = "dtr + defrag"
print(format_rows(frag + compacting))

# %% [markdown]
# `fragmentation` is Coop's measure: the free bytes (as a fraction of the budget) at each
# eviction decision, averaged - bytes that were free but in the wrong place. `dtr` makes
# many evictions that fragmentation forced; MegEngine's free-neighbour term and Coop's
# window are meant to make fewer (the table says whether they do here). MegEngine also
# *compacts* the arena when fragmentation blocks an allocation ([MegEngine 2021]: since v1.7
# defragmentation is on by default, "when memory is short and fragmented, the fragments
# are merged"). That is this runtime's default, `defrag="first"`: no eviction is then
# forced by fragmentation, at the price of copying the resident tensors
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
# A picture of the problem, on a tiny arena: two holes of 30 bytes, a request of 50.

# %%
arena = FirstFitArena(100)
blocks = {k: arena.alloc(20, k) for k in "abcde"}
arena.free(blocks["b"])
arena.free(blocks["d"])
arena.alloc(10, "x")
print(list(arena.blocks()))
print("free", arena.free_bytes, "largest free block", arena.largest_free(),
      "-> a 50-byte output does not fit")
for k in "ace":
    left, right = arena.free_around(blocks[k])
    print(f"evict {k}: frees {20 + left + right} contiguous bytes "
          f"(MegEngine's memory + free_mem for {k})")

# %% [markdown]
# ## 6. DTR, sqrt(n) and the optimum on one plot
#
# Static rematerialisation decides everything before the run. `chen_curve` is Chen et
# al.'s sqrt(n) checkpointing as MXNet's memonger does it (keep an op's output each time
# the running sum of forward bytes passes a threshold; recompute the rest once in the
# backward pass), over many thresholds. `checkmate` solves Checkmate's MILP (Jain et al.
# 2020) for the cheapest recomputation schedule within a budget - exact, but only for
# small graphs. All three use the same cost model and the same byte accounting.

# %%
tiny = linear_chain(10)
kw = dict(costs="unit", alignment=1)
dtr_rows = sweep(tiny, [1.0, 0.8, 0.6, 0.5, 0.4, 0.3], ["dtr", "lru"], **kw)
static = chen_curve(tiny, **kw)
for ratio in (0.7, 0.5):
    budget = budget_bounds(tiny, **kw).arena_budget(ratio)
    opt = checkmate(tiny, budget, time_limit=10, **kw)
    print(opt)
    static.append(opt)
plot_sweep(dtr_rows, static=static, title="chain of 10 + 10 unit ops")
plt.show()

# %% [markdown]
# The optimum knows the whole future; DTR only the past. On this chain DTR is close to it
# at every budget, and it never needed the graph in advance.
#
# ## Exercises
#
# **1.** Write an eviction heuristic `my_score(t, now)` (lower = evict first; `t` is a
# `TensorView`: `t.size`, `t.cost`, `t.staleness`, `t.neighbor_cost`, `t.recomputes`,
# `t.free_left`, ...). It passes when, on `linear_chain(200)` with sqrt(200) tensors of
# budget, it needs less compute than `lru`.
#
# **2.** In the tiny arena of section 5, which single tensor would you evict so that the
# 50-byte output fits? Put its name in `ANSWER_2`.
#
# **3.** Without running anything: what is `budget_bounds(linear_chain(n)).lower` in
# tensors (units), for any n >= 2? Put the number in `ANSWER_3`.

# %%
def my_score(t: TensorView, now: float) -> float:
    raise NotImplementedError      # replace this line with your score


ANSWER_2 = None      # e.g. "a"
ANSWER_3 = None      # e.g. 2

# %%
def check_exercises():
    chain, budget = linear_chain(200), int(math.sqrt(200)) * UNIT
    try:
        simulate(linear_chain(20), 5 * UNIT, heuristic=my_score, costs="unit", alignment=1,
                 thrash_limit=math.inf)
        done = True
    except NotImplementedError:
        done = False
    if not done:
        print("1: not done yet")
    else:
        def cost(h):
            try:
                return simulate(chain, budget, heuristic=h, costs="unit", alignment=1).overhead
            except mg.ThrashError:
                return math.inf
        mine, lru = cost(my_score), cost("lru")
        print(f"1: {'right' if mine < lru else 'not quite'}: yours x{mine:.3f}, lru x{lru:.3f}")
    if ANSWER_2 is None:
        print("2: not done yet")
    else:
        a = FirstFitArena(100)
        ids = {k: a.alloc(20, k) for k in "abcde"}
        a.free(ids["b"])
        a.free(ids["d"])
        a.alloc(10, "x")
        a.free(ids[ANSWER_2])
        print(f"2: {'right' if a.can_fit(50) else 'not quite'}: after evicting {ANSWER_2} "
              f"the largest free block is {a.largest_free()} bytes")
    if ANSWER_3 is None:
        print("3: not done yet")
    else:
        truth = budget_bounds(linear_chain(50), costs="unit", alignment=1).lower // UNIT
        print(f"3: {'right' if ANSWER_3 == truth else 'not quite'}: {truth} - a backward "
              "op reads g_i and x_(i-1) and writes g_(i-1)")


check_exercises()

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
#   neighbourhood) reproduces sqrt(n) checkpointing on a chain; LRU thrashes.
# * Real memory has addresses. Evictions that do not make one contiguous hole are wasted
#   (fragmentation-forced); MegEngine scores free neighbours and compacts, Coop evicts
#   contiguous windows.
# * Static plans (sqrt(n), the Checkmate optimum) need the whole graph in advance; DTR
#   needs only the past, and on simple graphs comes close to the optimum.

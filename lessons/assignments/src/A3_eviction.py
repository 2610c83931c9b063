# %% [markdown]
# # Assignment 3 · An eviction heuristic for DTR
#
# **Task.** Write `my_heuristic(t, now)`: the score of one tensor `t` that sits in memory
# at runtime clock `now`. When DTR needs bytes it has not got, it scores every candidate
# and evicts the one with the **lowest** score; an evicted tensor is recomputed from its
# inputs if it is needed again. A good heuristic evicts what is cheap to recompute, big,
# and not needed soon - so that the run under a small budget does little extra compute.
#
# **Background (MegEngine's DTR [MegEngine 2021]).** Dynamic Tensor Rematerialization runs a
# training step under a byte budget. MegEngine's `find_best_tensor` walks the candidates,
# skips those that are not available - an available tensor (1) has a compute path, (2) is
# in memory and (3) is **not pinned** - and evicts the one with the smallest
#
#     (cost + 1e-3)^a * r^recompute_times / ((memory + free_mem)^b * (staleness + 1e-3)^c)
#
# where `cost` is the cost of the evicted neighbourhood it would drag into a
# recomputation, `memory` its bytes, `free_mem` the free bytes on either side of it in
# memory, and `staleness` the time since it was last used. DTR's paper [Kirisame 2021] uses
#
#     h_DTR(t) = (c0(t) + e*(t)) / (memory(t) * staleness(t))
#
# with lesson 07's names: `c0` the tensor's own cost (`t.cost`) and `e*` the cost of its
# *evicted neighbourhood* (`t.neighbour_cost`): the evicted ancestors recomputing it would
# need and the evicted descendants that would need it. A tensor is *pinned* while an op
# that reads or writes it runs: evicting it would pull its bytes from under the kernel.
#
# **h_DTR is where you start, not where you finish.** Typed in as it stands, it passes
# every case and scores at most 60 - and so does MegEngine's formula: each case's 60% mark
# is the compute of the better of the two, the formulas the lessons show. The last 40
# points of a case go to needing less compute than that, all of them to needing no more
# than the *target*, your instructor's reference heuristic, which is clearly better than
# both on every graded case (its numbers are in the check's table; its code is not yours
# to read). Ask what h_DTR weighs alike that is not alike, and what the fields below tell
# you that it ignores.
#
# **What `t` offers** (read-only; costs in FLOPs, `now` on the same clock):
#
# | field | meaning |
# |---|---|
# | `t.pinned` | an input or output of the op being run (or about to be): must not be evicted |
# | `t.size` | bytes it occupies |
# | `t.cost` | cost of recomputing it (its producer op) |
# | `t.staleness` | `now` minus the last time it was used (always > 0) |
# | `t.recomputes` | how many times it was recomputed so far |
# | `t.neighbour_cost` | `e*`: the cost of its evicted neighbourhood (lesson 07; without `t.cost`) |
# | `t.megengine_cost` | MegEngine's `estimate_neighbor_cost` |
# | `t.ancestor_cost` | `t.cost` plus every evicted ancestor a recomputation would need |
# | `t.evicted_neighbours`, `t.free_left`, `t.free_right`, `t.name`, `t.kind`, `t.node` | as named |
#
# Return a number; `math.inf` means "never evict this one" - what every pinned tensor
# must get.
#
# **Budgets.** A budget of 40% means 40% of the **total** memory a run without
# recomputation needs - everything the training step holds: parameters, inputs and
# outputs (never evicted) plus the peak of the arena of activations, gradients and
# workspace. That is the DTR paper's definition; the arena gets 40% of the total minus
# the bytes that stay outside it (`Bounds.arena_budget(0.4, "total")`).
#
# **Scoring.** Each case runs a model's training step for real (NumPy kernels, one arena
# of exactly the budget) under a tight budget: three models of the zoo - ResNet-50 at 40%
# and 35% of the total peak, an 8-layer Transformer at 40% and 35%, an LSTM unrolled over
# 48 steps at 50% and 40%, small enough that a run takes a second or two - and, where your
# instructor adds them, programs you have not seen. A case passes when the run finishes, no
# pinned tensor was chosen, every score was a number, and the outputs equal a plain run's
# bit for bit; finishing alone earns nothing. A passing case's points read your *extra
# compute* (compute overhead - 1; the overhead is total compute / compute without
# recomputation) on a scale with three marks, measured on that case:
#
# | your extra compute | points of the case |
# |---|---|
# | a constant score's, or more (the trivial answer) | 0% |
# | the lessons' formula's: the better of h_DTR and MegEngine's | 60% |
# | the target's, or less | 100% |
#
# and in proportion in between, on a log scale of extra compute + 1% (halving your extra
# compute is worth the same everywhere; the 1% keeps a gap of a thousandth from costing
# much). The check's table shows each mark: `target`, `dtr`, `megengine` and `constant`,
# with LRU's beside; a run that thrashes (stops at 10x the compute without
# recomputation) counts as x10 in the table's geometric mean. Which tensor is cheap to
# recompute matters, not only which was used last: the chain below (not graded: every
# heuristic of note ties on it) shows what LRU costs next to DTR, and the check's table
# shows it on every graded case.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false}
import math
import sys
from pathlib import Path

try:
    import minigraph as mg
except ModuleNotFoundError:          # a clone without `pip install -e .`: use the repo
    sys.path.insert(0, str(Path.cwd().parents[1]))
    import minigraph as mg

from minigraph.examples import linear_chain
from minigraph.grading import HeuristicFault, check_heuristic, load_solution, run_heuristic
from minigraph.grading.heuristic_grader import budget_for, case_program, heuristic_cases
from minigraph.runtime.dtr import simulate

# %% [markdown]
# ## DTR on the linear chain
#
# The DTR paper's example: 24 unit-cost forward ops, then 24 backward ops that each read
# a forward tensor, in reverse. With 40% of the memory it needs (of the total peak, as in
# the grading), DTR recomputes some of the forward tensors; here is what the library's
# own heuristics cost:

# %%
chain = linear_chain(24)
overhead = {}
for name in ["dtr", "lru", "megengine"]:
    trace = simulate(chain, ratio=0.4, heuristic=name, alignment=1, costs="unit")
    overhead[name] = trace.overhead
    print(f"{name:10} compute x{trace.overhead:.3f}, {trace.evictions} evictions")
assert overhead["lru"] > overhead["dtr"]     # the recency of a use is not enough
print(f"LRU's run computes {overhead['lru'] / overhead['dtr']:.2f}x what DTR's does")

# %% [markdown]
# `run_heuristic` tries a heuristic of yours the same way (simulated, in this process;
# `ratio` is of the total peak, as in the grading). Least-recently-used, with the pinned
# tensors kept out:

# %%
def lru(t, now):
    if t.pinned:
        return math.inf
    return -t.staleness          # the stalest tensor has the lowest score


def show(trace):
    print(f"{trace.heuristic}: compute x{trace.overhead:.3f}, {trace.evictions} evictions, "
          f"budget {trace.total_ratio:.0%} of the total peak "
          f"({trace.ratio:.0%} of the arena peak)")


show(run_heuristic(lru, chain, ratio=0.4, alignment=1, costs="unit"))

# %% [markdown]
# ## The graded models and their budgets
#
# What the grading runs: each model's total peak, split into the bytes outside the arena
# and the arena peak, and the arena each budget leaves.

# %%
shown = set()
for case in heuristic_cases(chain=False):
    b = case_program(case).bounds()
    model = case.name.split("/")[0]
    if model not in shown:
        shown.add(model)
        print(f"{model}: total peak {b.total / 2**20:.2f} MiB = {b.external / 2**20:.2f} MiB "
              f"outside the arena + arena peak {b.peak / 2**20:.2f} MiB")
    budget, _ = budget_for(case_program(case), case.ratio, case.ratio_of)
    print(f"    {case.name:16} arena of {budget / 2**20:5.2f} MiB")

# %% [markdown]
# ## Your solution
#
# Fill in `my_heuristic`. Run the cell after it too: it lets a grader swap in another file.

# %% tags=["solution"] nbgrader={"grade": false, "grade_id": "my_heuristic", "locked": false, "schema_version": 3, "solution": true}
def my_heuristic(t, now):
    """Score of resident tensor `t` at clock `now`; the lowest is evicted first.
    Return math.inf for a tensor that must not be evicted (t.pinned)."""
    # YOUR CODE HERE
    raise NotImplementedError


# %% nbgrader={"grade": false, "grade_id": "load_solution", "locked": true, "schema_version": 3, "solution": false}
# Graders: MINIGRAPH_SOLUTION=path/to/file.py (or "reference") replaces the function above.
my_heuristic = load_solution("my_heuristic", default=my_heuristic)

# %% [markdown]
# Try it on the chain:

# %%
try:
    show(run_heuristic(my_heuristic, chain, ratio=0.4, alignment=1, costs="unit"))
except NotImplementedError:
    print("my_heuristic: not implemented yet")
except HeuristicFault as e:      # a pinned tensor chosen, a score that is not a number...
    print(e)
except Exception as e:           # the run thrashed or got stuck: the check says more
    print(f"{type(e).__name__}: {e}")

# %% [markdown]
# ## Check
#
# The report ends with the table of compute overheads on every case: yours, the target's
# (the reference heuristic's: 100% of the case), DTR's and MegEngine's (the better is
# 60%), LRU's, and a constant score's (0%). The number under the report is your score out
# of 100: what nbgrader counts as this cell's points when your instructor grades with it.

# %% tags=["check"] nbgrader={"grade": true, "grade_id": "check_heuristic", "locked": true, "points": 100, "schema_version": 3, "solution": false}
from minigraph.grading import check_heuristic   # again: no name defined above stands in for it

report = check_heuristic(my_heuristic)
display(report)
report.score          # out of 100: nbgrader takes this number as the points of this cell

# %% [markdown]
# From a terminal: `python -m minigraph.grading a3 path/to/solution.py`, or
# `pytest tests/grading -m a3 --student path/to/solution.py`.

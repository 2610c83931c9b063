# %% [markdown]
# # 07e · Which rematerialisation policy, and chosen how
#
# **The idea.** DTR decides while the program runs, knowing only the past. A static plan
# decides before the run, with the whole graph in hand: Chen's sqrt(n) checkpointing
# keeps every so-many outputs and recomputes the rest once, and Checkmate [Jain 2020]
# solves for the cheapest schedule a budget allows. That optimum is a yardstick: at the
# same budget, the gap between it and DTR is what not knowing the future costs. But a
# runtime still has to *pick* its online policy, and there are several. It can try them
# all in simulation and keep the cheapest (a portfolio), or pick one with a rule before
# the run (`auto`). A rule is then worth only its score on programs it was not fitted
# to, which is how DTR's default was chosen: by leaving one trace out at a time.
#
# **Source.** Chen's sqrt(n) checkpointing [Chen 2016], Checkmate [Jain 2020], the DTR
# paper and its simulator's heuristics [Kirisame 2021]. The code is the research wing
# `minigraph/dtr_research/` (`checkpoint.py`, `portfolio.py`, `holdout.py`) and the
# engine room's `minigraph/runtime/dtr/heuristics.py` (`auto`).

# %%
import sys
from pathlib import Path

try:
    import minigraph as mg
except ModuleNotFoundError:          # a clone without `pip install -e .`: use the repo
    sys.path.insert(0, str(Path.cwd().parent))
    import minigraph as mg

import matplotlib.pyplot as plt
from IPython.display import Markdown, display

from minigraph.dtr_research import (
    checkmate, chen_curve, generated_trace, parse_trace, simulate_best,
)
from minigraph.dtr_research.holdout import (
    NO_DEAD_FIRST, WORSE, against_dtr, leave_one_out, measure,
)
from minigraph.examples import linear_chain
from minigraph.experiments.dtr import sweep
from minigraph.lessons import check_answers, l07e
from minigraph.models import get_model
from minigraph.runtime.dtr import DTROptions, budget_bounds, simulate
from minigraph.runtime.dtr.heuristics import AUTO_CV, AUTO_RATIO, auto_choice, cost_per_byte_cv
from minigraph.runtime.dtr.program import program_from_graph
from minigraph.viz.plots import plot_sweep

print("minigraph", mg.__version__)

# %%

def show_table(header, rows):
    """Render rows (lists of cells) as a Markdown table under the cell."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    display(Markdown("\n".join(lines)))


# %% [markdown]
# ## 1. DTR, sqrt(n) and Checkmate at the same budgets
#
# `chen_curve` is Chen's sqrt(n) checkpointing as MXNet's memonger does it: keep an op's
# output each time the running sum of forward bytes passes a threshold, recompute the
# rest once in the backward pass; one plan per threshold. `checkmate` solves Checkmate's
# MILP for the cheapest recomputation schedule within a budget. It is exact when the
# solver proves it within its work budget (`node_limit`, branch-and-bound nodes: the same
# answer on any machine at any load), and only for small graphs. All three use the same
# cost model and the same counting: a budget is working memory, a ratio is of DTR's
# total peak. The graph: a chain of 10 forward ops and their 10 backward ones, each op
# costing one unit.

# %%
tiny = linear_chain(10)
kw = dict(costs="unit", alignment=1)
tb = budget_bounds(tiny, **kw)
NODES = 100                          # HiGHS's work budget; 60 s stays only as a cap
static, versus = chen_curve(tiny, **kw), []
for ratio in (0.7, 0.6, 0.5):
    budget = tb.arena_budget(ratio)
    at_budget = simulate(tiny, budget, heuristic="dtr", **kw).overhead
    opt = checkmate(tiny, ratio=ratio, node_limit=NODES, time_limit=60, **kw)
    assert opt.optimal, "each budget of the table is solved to a proven optimum"
    assert opt.budget == budget and opt.budget_ratio == ratio     # drawn at DTR's x
    assert opt.overhead <= at_budget + 1e-9, "nothing beats a proven optimum"
    static.append(opt)
    fits = [s for s in static if s.method == "sqrt(n)" and s.peak <= budget]
    versus.append([f"{ratio:.0%}", budget, f"x{opt.overhead:.3f}", f"{opt.peak} B",
                   f"x{at_budget:.3f}",
                   f"x{min(s.overhead for s in fits):.3f}" if fits else "none fits"])
show_table(["budget (of total)", "budget (bytes)", "Checkmate (proven optimal)",
            "working memory it needs", "DTR", "cheapest sqrt(n) that fits"], versus)
print("sqrt(n)'s plans:", ", ".join(f"{s.peak} B at x{s.overhead:.3f}"
                                    for s in static if s.method == "sqrt(n)"))

# %% [markdown]
# On the plot, DTR's lines sit at the budget each run was given, and each Checkmate star
# at the budget it was given, the same x as DTR's point there: what the two paid is read
# straight up. sqrt(n) has no budget; its points sit at the working memory each plan
# needs.

# %%
dtr_rows = sweep(tiny, [1.0, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3], ["dtr", "lru"], **kw)
ax = plot_sweep(dtr_rows, static=static, title="chain of 10 + 10 unit ops")
plt.show()
stars = [ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith("static:checkmate")]
print("stars at", ", ".join(f"{s.get_xdata()[0]:.2f}" for s in stars),
      "of the total peak: the budgets of the table")

# %% [markdown]
# At 70% DTR pays what the optimum pays; at 60% and 50% it pays more, and the gap grows
# as the budget shrinks: that gap is the price of not knowing the future. sqrt(n) plans
# once per threshold and cannot aim at a budget: at 60% and below none of its plans fits.
# Checkmate may also use less than its budget; the table gives the working memory its
# schedule really needs. DTR never needed the graph in advance, and Checkmate's MILP
# grows with the square of the ops: it is the yardstick, not the runtime.
#
# ## 2. A portfolio: try several rule sets, keep the cheapest
#
# No score wins at every budget (lesson 07's sweep). Simulation costs no kernels, so
# `simulate_best` runs several option sets (`portfolio.CANDIDATES`) at one budget and
# keeps the cheapest; a real run (`PortfolioExecutor`) then runs only the winner. The
# price is one simulation per candidate. Its work budget, `runs=`, counts candidate runs
# (the same choice on any machine); `time_limit=` is for a user in a hurry, and is off
# here. On the zoo transformer:

# %%
tf = get_model("transformer").graph
for ratio in (0.8, 0.6):
    best = simulate_best(tf, ratio=ratio, time_limit=None)   # no clock: the same anywhere
    tried = ", ".join(f"{k} {'thrash' if v == float('inf') else f'x{v:.3f}'}"
                      for k, v in best.tried)
    print(f"{ratio:.0%}: kept {best.label} (x{best.overhead:.3f}); tried {tried}")
    assert best.overhead == min(v for _, v in best.tried)

# %% [markdown]
# At 80% `dtr-live` pays less than `dtr`; at 60% `dtr` thrashes where others finish.
# Keeping the cheapest is never above any one candidate (asserted above).
#
# ## 3. One rule, picked before the run; and the default, held out
#
# `auto` (`DTROptions(heuristic="auto")`) pays one simulation, not one per candidate.
# Before the run it measures how much the cost per byte $c_0/m$ varies over the tensors
# that may be evicted (its coefficient of variation, CV) and the budget $B$ against the
# peak $P$ of a run that never evicts, and keeps one score for the whole run: MSPS
# (the tensor's cost with the evicted ancestors it would drag in, per byte) when the CV
# is at or above a threshold, since costs per byte that differ are what MSPS ranks well;
# else h_DTR when $B/P$ is at or above a second threshold, and `dtr-live` (h_DTR counting
# only the evicted tensors that may still be recomputed) at tighter budgets.

# %%
log = parse_trace(generated_trace("lstm", 6), name="lstm-6")
resnet = program_from_graph(get_model("resnet").graph)
print(f"auto's thresholds: CV {AUTO_CV}, B/P {AUTO_RATIO}")
for name, prog in (("lstm-6 trace", log), ("resnet training step", resnet)):
    peak = prog.bounds().peak
    print(f"{name}: CV of c0/m {cost_per_byte_cv(prog):.2f}; auto picks "
          + ", ".join(f"{auto_choice(prog, int(r * peak), DTROptions())} at {r:.0%} of P"
                      for r in (0.8, 0.5)))
assert auto_choice(log, 10**12) == "msps-stale"          # costs per byte differ: MSPS
assert auto_choice(resnet, resnet.bounds().peak) == "dtr"
assert auto_choice(resnet, int(0.5 * resnet.bounds().peak)) == "dtr-live"   # tight

# %% [markdown]
# Those two thresholds were fitted on the benchmark's own traces, and scoring a rule on
# the traces it was fitted to proves nothing about a trace it has not seen. So the rule
# is put to the test it should have had: **leave one trace out**. Each trace is held out
# in turn; the thresholds are fitted on all the others (the lowest summed log overhead,
# `holdout.fit`) and scored, cell by cell, on the one held out, against h_DTR
# (`holdout.against_dtr`). The target for a default: never more than 1% worse than h_DTR
# on a held-out cell, never failing where h_DTR finishes. Here on four small generated
# traces at seven budgets each:

# %%
small = [parse_trace(generated_trace(f, n), name=f"{f}-{n}")
         for f, n in (("chain", 12), ("unet", 2), ("resnet", 3), ("lstm", 6))]
cells = [c for prog in small for c in measure(prog, (0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3))]
folds = leave_one_out(cells)
held = against_dtr([pc for f in folds for pc in f.picked])
print(f"worse: more than {WORSE - 1:.0%} more compute than h_DTR, or failing where it finishes")
print(f"held out: worse than h_DTR in {held.worse} of {held.cells} cells (up to "
      f"x{held.worst:.3f}), better in {held.better}: the target is "
      f"{'met' if held.passes else 'missed'}; the default is {DTROptions().heuristic!r}")
off = against_dtr([(c, NO_DEAD_FIRST) for c in cells])
print(f"h_DTR without its dead-first rule: worse than with it in {off.worse} cells "
      f"(failed in {off.failed}), better in {off.better}")
assert not held.passes and DTROptions().heuristic == "dtr" and DTROptions().dead_first

# %% [markdown]
# Better on average is not the bar for a default; never worse is. Held out, the rule is
# better than h_DTR in many cells but worse in one, so the target is missed, here as on
# the benchmark's larger set (`python benchmarks/dtr_heuristics.py` prints it,
# `benchmarks/RESULTS.md`, "DTR's default, chosen out of sample"). So h_DTR is the
# default (`DTROptions()`), with the runtime's dead-first rule, which these cells never
# found worse than its absence. `auto` stays an option with this record, and the
# portfolio, which runs both and keeps the cheaper, is never above either.
#
# ## Exercise
#
# **1.** The price of not knowing the future, at a budget the table did not try. What is
# the least compute (the overhead factor, e.g. `1.5`) that *any* schedule of the same
# chain (`l07e.exercise_1_graph()`) pays within 55% of DTR's total peak? You may solve
# for it, but the table of section 1 is enough to reason it out: which schedule fits,
# and could a smaller budget let one pay less? Put the number in `ANSWER_1`.

# %%
print(f"budget: {l07e.EXERCISE_1_RATIO:.0%} of the total, "
      f"{tb.arena_budget(l07e.EXERCISE_1_RATIO)} B of working memory")

ANSWER_1 = None      # e.g. 1.5

# %%
check_answers({1: (ANSWER_1, l07e.exercise_1)})

# %% [markdown]
# ## Summary
#
# * Static plans need the whole graph in advance. sqrt(n) gives one plan per threshold
#   and cannot aim at a budget; Checkmate's MILP gives the least compute a budget allows,
#   the yardstick for DTR, on small graphs.
# * A portfolio picks the cheapest rule set per budget by simulation, at one run per
#   candidate; `auto` picks one score before a single run.
# * A rule counts by its score on traces it was not fitted to. Held out one trace at a
#   time, `auto` loses to h_DTR on some cell, so the default is h_DTR.

# %% [markdown]
# # 07b · Beyond DTR: MegEngine's union-find, simrd's rules, fragmentation, Coop, Checkmate
#
# **Goal.** Lesson 07 built DTR: a budget of working memory, an eviction loop and a
# score. Real runtimes and the research around DTR go further. This lesson takes the
# extras one at a time, each a switch of the full runtime (`DTROptions`): MegEngine's
# union-find estimate of the evicted neighbourhood against the DTR paper's, the DTR
# authors' simulator's rules, the *addresses* of free bytes (fragmentation, compaction),
# Coop's window and layout, Checkmate's exact static schedule next to DTR, and a
# portfolio that tries several rule sets and keeps the cheapest.
#
# **Source.** MegEngine's DTR [MegEngine 2021] (`TensorInfo` and `ComputePath`, fake
# delete versus real delete, the union-find of evicted neighbours, the free memory around
# a block, defragmentation), the DTR paper and its simulator simrd [Kirisame 2021], Coop
# [Zhang 2023] (a sliding window over address-ordered tensors, cheap-tensor
# partitioning, recomputable in-place), Checkmate [Jain 2020] and Chen's sqrt(n)
# checkpointing [Chen 2016]. The code is the engine room of `minigraph/runtime/dtr/`:
# `runtime.py` (the full runtime), `eviction.py`, `heuristics.py`, `neighborhood.py`,
# `allocator.py`, `coop_inplace.py`, `simrd.py`, `checkpoint.py`, `portfolio.py`.

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
from IPython.display import Markdown, display

from minigraph.examples import linear_chain
from minigraph.experiments.dtr import format_rows, sweep
from minigraph.lessons import check_answers, l07b
from minigraph.models import get_model
from minigraph.runtime.dtr import (CHEAP_DENSITY, DTROptions, DTRRuntime, OpSpec, Program,
                                   TensorSpec, budget_bounds, checkmate, chen_curve,
                                   generated_trace, get_heuristic, parse_trace, replay_trace,
                                   simulate, simulate_best)
from minigraph.runtime.dtr.heuristics import AUTO_CV, AUTO_RATIO, auto_choice, cost_per_byte_cv
from minigraph.runtime.dtr.program import program_from_graph
from minigraph.viz.plots import plot_sweep

# %%

def show_table(header, rows):
    """Render rows (lists of cells) as a Markdown table under the cell."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    display(Markdown("\n".join(lines)))


UNIT = 4    # bytes of a one-element float32 tensor (alignment 1)
CASES = [(n, k) for n in (100, 400) for k in (2, 1)]


def chain_compute(n, k, heuristic):
    """Compute overhead on linear_chain(n) with k*sqrt(n) unit tensors (inf: thrashed)."""
    try:
        return simulate(linear_chain(n), int(k * math.sqrt(n)) * UNIT, heuristic=heuristic,
                        costs="unit", alignment=1).overhead
    except mg.ThrashError:
        return math.inf


def cell(x):
    return "thrash" if math.isinf(x) else f"x{x:.3f}"

# %% [markdown]
# ## 1. Two union-finds for one neighbourhood
#
# Lesson 07's $h_{DTR}$ needs $e^*(t)$, the cost of t's evicted neighbourhood; MegEngine's
# `eval_func` needs its own neighbour cost. Walking the evicted neighbours at every
# decision is slow, so both keep *union-find* classes of evicted tensors and add up class
# costs instead. They do not keep the same classes:
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
# cost unit (FLOPs by default). Below, a run of `megengine` on an LSTM records, at each
# score, MegEngine's neighbour cost and DTR-eq's class cost for the same candidate.

# %%
def eval_func(cost, memory, free_mem, staleness, recompute_times, a=1.0, b=1.0, c=1.0,
              r=1.0001):
    """MegEngine 1.4's TensorInfo::eval_func (lesson 07, section 5; memory in MiB)."""
    return ((cost + 1e-3) ** a * r ** recompute_times
            / (((memory + free_mem) / 2**20) ** b * (staleness + 1e-3) ** c))


scored = []
megengine = get_heuristic("megengine")


def megengine_watched(t, now):
    """The `megengine` score, with MegEngine's and DTR-eq's neighbour costs recorded."""
    scored.append(dict(name=t.name, cost=t.megengine_cost, eq=t.eqclass_cost))
    return megengine(t, now)


lstm = get_model("lstm", T=16, hidden=32, batch=256, input=16).graph
run = simulate(lstm, ratio=0.8, heuristic=megengine_watched, defrag="last-resort")
below = [d for d in scored if d["cost"] < d["eq"]]
above = [d for d in scored if d["cost"] > d["eq"]]
print(f"MegEngine's neighbour cost below DTR-eq's in {len(below)} of {len(scored)} scores, "
      f"above in {len(above)}")

# %% [markdown]
# The gap comes from the readers: MegEngine's neighbours are t's producer's inputs and
# sibling outputs, so an evicted tensor that *reads* t (and would need t to be recomputed)
# costs t nothing. Does that matter? On lesson 07's chain (its section 4), compare
# `megengine` with the same `eval_func` fed DTR-eq's classes instead (`mge with eq classes`): only the
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
# can only matter where blocks have holes beside them: section 3.
#
# ## 2. The score is half of DTR; the rules are the other half
#
# The DTR authors' simulator, simrd [Kirisame 2021], has rules of its own (listed in
# `minigraph/runtime/dtr/simrd.py`): views share their base's storage; an op locks its
# resident inputs before rematerialising the others; a multi-output op needs room for all
# its outputs; a released tensor is evicted at once and still counts in its neighbours'
# neighbourhoods; ties go to the last candidate. `DTROptions.simrd(h)` replays a trace
# with them (`benchmarks/dtr_reference.py` compares it with simrd itself). One of our own
# rules is `dead_first`: a dead tensor brought back by a neighbour's recomputation goes
# first. A generated LSTM-like training trace (views, multi-output ops, an optimizer's
# in-place update), replayed at the same bytes (the authors' budget: a ratio of the
# baseline peak, constants included) with simrd's rules and ours:

# %%
log = parse_trace(generated_trace("lstm", 6), name="lstm-6")
RULES = {"simrd's rules": DTROptions.simrd("dtr"),
         "ours": DTROptions(heuristic="dtr", allocator="ideal"),
         "ours, dead_first=False": DTROptions(heuristic="dtr", allocator="ideal",
                                              dead_first=False)}
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
# ## 3. Memory is not a commodity: fragmentation
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
# eviction decision, averaged. The second table sums the forced evictions per heuristic.
# Coop's window does not make them disappear: when the free bytes already sufficed, every
# tensor of the window it evicts counts as forced, though a compacting allocator would
# have needed none of them. MegEngine *compacts* the arena when fragmentation blocks an
# allocation ([MegEngine 2021]: since v1.7 "when memory is short and fragmented, the
# fragments are merged"); that is this runtime's default, `defrag="first"`: no eviction
# is then forced (the `dtr + defrag` rows, asserted), at the price of copying the resident
# tensors (`trace.moved_bytes`), and the decisions are those of the ideal allocator.

# %% [markdown]
# ## 4. Coop's layout: cheap tensors side by side, in place but recomputable
#
# Coop [Zhang 2023] pairs its window with two changes to *where* tensors lie; both are
# options of any heuristic here.
#
# **Cheap-tensor partitioning** (`DTROptions(partition=True)`). Coop sorts tensors by
# *cost density*, the compute that made them over their bytes: super-linear ops (matmul,
# convolution) are denser than element-wise ones. Cheap
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


# %%
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


# %% [markdown]
# First fit leaves every pair of neighbours with one dear tensor in it (`d` is `E`'s
# input, pinned), so the cheapest window costs a dear tensor plus a cheap one. The
# partitioned arena has put `a` and `c` side by side at the bottom: the window evicts the
# two cheap ones, and both dear tensors stay (the printed costs).
#
# **Recomputable in-place** (`DTROptions(recomputable_inplace=True)`). DTR runs every op
# out of place: `b = relu(a)` gets a second block while `a` is still resident, and `a`'s
# block becomes a hole a moment later. Coop records an in-place op instead: `b` takes
# `a`'s block and `a` is marked evicted, so a recomputation that needs `a` re-runs `a`'s
# producer (`coop_inplace.py`; the pairs follow lesson 03's rules; `tests/test_coop.py`
# shows it on a hand-written program: out of place a dear tensor is evicted for `relu`'s
# output, in place nothing moves). On section 3's LSTM, with compaction off, the counts of
# each idea alone and together:

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


# %% [markdown]
# At this budget the window alone makes fewer forced evictions than `dtr`, in-place
# lowers the count for `dtr` and for `coop`, the partition alone raises the evictions
# and the compute, and the two layout ideas together make the fewest forced evictions
# (each asserted above). The partition is no free win: its two regions grow towards each
# other, and where they meet a window may have to take dear tensors too.
# `python benchmarks/dtr.py --coop` runs the variants in real mode on the zoo models
# (`benchmarks/RESULTS.md`): neither idea wins everywhere.


# %% [markdown]
# ## 5. DTR, sqrt(n) and Checkmate at the same budgets
#
# Static rematerialisation decides everything before the run. `chen_curve` is Chen et
# al.'s sqrt(n) checkpointing as MXNet's memonger does it (keep an op's output each time
# the running sum of forward bytes passes a threshold; recompute the rest once in the
# backward pass), over many thresholds. `checkmate` solves Checkmate's MILP [Jain 2020]
# for the cheapest recomputation schedule within a budget - exact when the solver proves
# it within its time limit, and only for small graphs. All three use the same cost model
# and the same counting: a budget is working memory, a ratio is of DTR's total peak.
#
# On the plot, DTR's lines and the sqrt(n) points sit at the budget each run was given
# (for sqrt(n), which has no budget, the working memory it needs), and each Checkmate star
# at the budget it was given, the same x as DTR's point at that budget: what the two paid
# there is read straight up. A schedule the solver found but could not prove optimal in
# time is labelled so (how far the solver gets depends on the machine). Checkmate may use
# less than its budget: the table gives the working memory it really needs.

# %%
tiny = linear_chain(10)
kw = dict(costs="unit", alignment=1)
tb = budget_bounds(tiny, **kw)
dtr_rows = sweep(tiny, [1.0, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3], ["dtr", "lru"], **kw)
static = chen_curve(tiny, **kw)
versus = []
for ratio, limit in ((0.7, 10), (0.6, 10), (0.5, 5)):
    budget = tb.arena_budget(ratio)
    at_budget = simulate(tiny, budget, heuristic="dtr", **kw).overhead
    try:
        opt = checkmate(tiny, ratio=ratio, time_limit=limit, **kw)
    except mg.BudgetError:           # the solver found no schedule before its time limit
        versus.append([f"{ratio:.0%}", budget, f"none found in {limit} s", "-", "-",
                       f"x{at_budget:.3f}"])
        continue
    if not opt.optimal:
        opt = dataclasses.replace(opt, method="checkmate, stopped at its time limit")
    static.append(opt)
    assert opt.budget == budget and opt.budget_ratio == ratio     # drawn at DTR's x
    versus.append([f"{ratio:.0%}", budget, "proven optimal" if opt.optimal else
                   f"best found in {limit} s, not proven", f"x{opt.overhead:.3f}",
                   f"{opt.peak} B ({(opt.peak + tb.external) / tb.total:.0%})",
                   f"x{at_budget:.3f}"])
    if opt.optimal:
        assert opt.overhead <= at_budget + 1e-9, "nothing beats a proven optimum"
show_table(["budget (of total)", "budget (bytes)", "Checkmate", "its compute",
            "working memory it needs", "DTR's compute"], versus)
ax = plot_sweep(dtr_rows, static=static, title="chain of 10 + 10 unit ops")
plt.show()
stars = [ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith("static:checkmate")]
print("stars at", ", ".join(f"{s.get_xdata()[0]:.2f}" for s in stars),
      "of the total peak: the budgets of the table")

# %% [markdown]
# Checkmate knows the whole future; DTR only the past. At each budget of the table the
# star and DTR's point share an x; where the solver proved its schedule optimal, that is
# the least compute any schedule can pay there, and the gap up to DTR's point is what not
# knowing the future cost. DTR never needed the graph in advance.
#
# ## 6. A portfolio: try several rule sets, keep the cheapest
#
# No score wins at every budget (lesson 07's sweep). Simulation costs no kernels, so
# `simulate_best` runs several option sets (`portfolio.CANDIDATES`: `dtr`, `dtr-live`,
# `msps`, and, on traces, simrd's four) at one budget and keeps the cheapest; a real run
# (`PortfolioExecutor`) then runs only the winner. The price is one simulation per
# candidate.

# %%
tf = get_model("transformer").graph
for ratio in (0.8, 0.6):
    best = simulate_best(tf, ratio=ratio)
    tried = ", ".join(f"{k} {cell(v)}" for k, v in best.tried)
    print(f"{ratio:.0%}: kept {best.label} (x{best.overhead:.3f}); tried {tried}")
    assert best.overhead == min(v for _, v in best.tried)

# %% [markdown]
# ## 7. The default: one run, its score picked before it starts
#
# The portfolio pays one simulation per candidate. The default, `auto` (`DTROptions()`),
# pays one: before the run it measures two things it already knows, how much the cost
# per byte $c_0/m$ varies over the tensors that may be evicted (its coefficient of
# variation, std / mean) and the budget $B$ against the peak $P$ of a run that never
# evicts, and keeps one score for the whole run:
#
# $$h_{auto}(t) = \begin{cases} h_{DTR} = \dfrac{c_0 + e^*(t)}{m \cdot s} &
# \text{if } \mathrm{CV}(c_0/m) < 3 \text{ and } B \ge 0.6\,P \\[4pt]
# \left(\dfrac{c_{anc}(t)}{m},\; -s\right) & \text{otherwise (MSPS, ties to the
# stalest)} \end{cases}$$
#
# MSPS ($c_{anc}$: the tensor's cost with the evicted ancestors it would drag in, per
# byte freed) ranks well when costs per byte differ, as between a matmul and the
# elementwise ops around it; where they barely differ (convolution nets), its key ties
# among many tensors and only staleness can rank them, so h_DTR decides, at generous
# budgets. MSPS's ties go to the stalest tensor (the second key of the pair) rather than
# to the scan order. On the 104 cells of `benchmarks/dtr_heuristics.py` this one run is
# at or below the best of simrd's four in 89 (h_DTR alone: 54), at 0.7x h_DTR's
# simulation time; the issue asked for 95% (99 cells), which only the portfolio reaches.
# `"dtr"` still names h_DTR itself, and with the runtime's extras off (the textbook
# loop) `auto` is h_DTR.

# %%
resnet = program_from_graph(get_model("resnet").graph)
for name, prog in (("lstm-6 trace", log), ("resnet training step", resnet)):
    peak = prog.bounds().peak
    print(f"{name}: CV of c0/m {cost_per_byte_cv(prog):.2f} (threshold {AUTO_CV}); auto picks "
          + ", ".join(f"{auto_choice(prog, int(r * peak), DTROptions())} at {r:.0%} of P"
                      for r in (0.8, 0.5)))
pick_rows = []
for r in (0.9, 0.7, 0.5):
    row = [r]
    for h in ("auto", "dtr", "msps"):
        try:
            t = replay_trace(log, ratio=r, heuristic=h)
            row.append(f"x{t.overhead:.3f}" + (f" ({t.heuristic})" if h == "auto" else ""))
        except (mg.ThrashError, mg.BudgetError):
            row.append("-")
    pick_rows.append(row)
show_table(["ratio", "auto (the default)", "dtr", "msps"], pick_rows)
assert replay_trace(log, ratio=0.7).heuristic.startswith("auto:")
assert auto_choice(log, 10**12) == "msps-stale"          # costs per byte differ: MSPS
assert auto_choice(resnet, resnet.bounds().peak) == "dtr" and AUTO_RATIO == 0.6

# %% [markdown]
# ## Exercise
#
# **1.** The arena printed below holds five tensors and two holes. Which single tensor
# would you evict so that an output of `l07b.REQUEST_1` bytes fits? Put its name in
# `ANSWER_1` (`arena1.free_around(offset)` gives the free bytes left and right of a block).

# %%
arena1, offsets1 = l07b.exercise_1_arena()
print("exercise 1's arena (offset, bytes, owner):", list(arena1.blocks()),
      f"- the output needs {l07b.REQUEST_1} bytes")

ANSWER_1 = None      # e.g. "p"

# %%
check_answers({1: (ANSWER_1, l07b.exercise_1)})

# %% [markdown]
# ## Summary
#
# * MegEngine's union-find joins an evicted tensor with its producer's inputs and its
#   siblings; the DTR paper's (`dtr-eqclass`) with its readers too, which the chain
#   rewards.
# * The runtime's rules matter as much as the score: simrd's rules and ours differ on the
#   same trace with the same h_DTR.
# * Real memory has addresses. Evictions made while the free bytes already sufficed are
#   fragmentation-forced; a per-tensor score, MegEngine's free-neighbour term and Coop's
#   contiguous windows all still make them; compaction (MegEngine's default) removes them.
# * Coop also changes the layout: cheap tensors from the bottom of the arena and dear ones
#   from the top (`partition=True`), and an in-place op whose overwritten input stays
#   recomputable (`recomputable_inplace=True`); neither wins everywhere.
# * Static plans (sqrt(n), Checkmate's MILP) need the whole graph in advance; compared at
#   the same budgets, Checkmate's proven optimum bounds what DTR can pay.
# * A portfolio picks the cheapest rule set per budget by simulation, at the price of one
#   run per candidate; the default (`auto`) picks h_DTR or MSPS once, before its one run,
#   from how much the cost per byte varies and how generous the budget is.

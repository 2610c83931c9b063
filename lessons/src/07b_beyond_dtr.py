# %% [markdown]
# # 07b · Beyond DTR: MegEngine's union-find, simrd's rules, fragmentation
#
# **Goal.** Lesson 07 built DTR: a budget of working memory, an eviction loop and a
# score. Real runtimes and the research around DTR go further. This lesson and the next
# (07c) take the extras one at a time, each a switch of the full runtime (`DTROptions`).
# Here: MegEngine's union-find estimate of the evicted neighbourhood against the DTR
# paper's, the DTR authors' simulator's rules, and the *addresses* of free bytes
# (fragmentation, compaction). Lesson 07c: Coop's layout, Checkmate's exact static
# schedule next to DTR, a portfolio of rule sets, and the default that picks its score.
#
# **Source.** MegEngine's DTR [MegEngine 2021] (`TensorInfo` and `ComputePath`, fake
# delete versus real delete, the union-find of evicted neighbours, the free memory around
# a block, defragmentation), the DTR paper and its simulator simrd [Kirisame 2021], Coop's
# sliding window [Zhang 2023]. The code is the engine room of `minigraph/runtime/dtr/`:
# `runtime.py` (the full runtime), `releases.py`, `room.py`, `eviction.py`,
# `heuristics.py`, `neighbourhood.py`, `allocator.py`; simrd's rules are the research
# wing's, `minigraph/dtr_research/simrd.py`.

# %%
import math
import sys
from pathlib import Path

try:
    import minigraph as mg
except ModuleNotFoundError:          # a clone without `pip install -e .`: use the repo
    sys.path.insert(0, str(Path.cwd().parent))
    import minigraph as mg

from IPython.display import Markdown, display

from minigraph.examples import linear_chain
from minigraph.experiments.dtr import format_rows, sweep
from minigraph.lessons import check_answers, l07b
from minigraph.models import get_model
from minigraph.dtr_research import SimrdOptions, generated_trace, parse_trace, replay_trace
from minigraph.runtime.dtr import DTROptions, get_heuristic, simulate

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
# | a class node | `DsuNode` (`parent`, summed time `t`) | `DSU` in `neighbourhood.py` (`ScoreInputs.dsu_mge`) | a second `DSU` (`ScoreInputs.dsu_eq`) |
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
# `minigraph/dtr_research/simrd.py`): views share their base's storage; an op locks its
# resident inputs before rematerialising the others; a multi-output op needs room for all
# its outputs; a released tensor is evicted at once and still counts in its neighbours'
# neighbourhoods; ties go to the last candidate. `SimrdOptions(h)` replays a trace
# with them (`benchmarks/dtr_reference.py` compares it with simrd itself). One of our own
# rules is `dead_first`: a dead tensor brought back by a neighbour's recomputation goes
# first, unless an evicted live tensor reads it (its recomputation would fetch it back at
# once). A generated LSTM-like training trace (views, multi-output ops, an optimizer's
# in-place update), replayed at the same bytes (the authors' budget: a ratio of the
# baseline peak, constants included) with simrd's rules and ours:

# %%
log = parse_trace(generated_trace("lstm", 6), name="lstm-6")
RULES = {"simrd's rules": SimrdOptions("dtr"),
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
# * Next, lesson 07c: Coop's layout, Checkmate, a portfolio, and DTR's default.

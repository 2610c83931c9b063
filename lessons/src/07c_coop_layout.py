# %% [markdown]
# # 07c · Coop's layout: where a tensor lies decides what goes
#
# **The idea.** Lesson 07bb counted fragmentation-forced evictions: DTR evicts until enough
# bytes are free, but a new tensor needs them *side by side*, so the runtime may evict
# many tensors whose bytes lie in the wrong places. Coop [Zhang 2023] asks where the
# bytes come from, not only which tensor is cheapest. Its window evicts the cheapest run
# of *neighbours* that makes one block big enough. That is only as good as the neighbours
# are: if every cheap tensor sits between two dear ones, every window must take a dear
# one too. So Coop changes the layout twice. It puts the tensors that are cheap to lose
# side by side (cheap ones from the bottom of the arena, dear ones from the top), and it
# leaves fewer holes: an op that may overwrite its input does so, and the overwritten
# input stays recomputable, as an evicted tensor would.
#
# **Source.** Coop [Zhang 2023] (the sliding window, cheap-tensor partitioning,
# recomputable in-place). The code is the engine room of `minigraph/runtime/dtr/`:
# `allocator.py` (`PartitionedArena`), `coop_inplace.py`, `eviction.py` (the window).

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

from minigraph.lessons import check_answers, l07c
from minigraph.lessons.l07c import OWN_COST, chain_ops, hand_program, layout
from minigraph.models import get_model
from minigraph.runtime.dtr import CHEAP_DENSITY, DTRRuntime, simulate

print("minigraph", mg.__version__)

# %%

def show_table(header, rows):
    """Render rows (lists of cells) as a Markdown table under the cell."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    display(Markdown("\n".join(lines)))


# %% [markdown]
# ## 1. Cheap tensors side by side
#
# Coop sorts tensors by *cost density*: the compute that made them over their bytes.
# Super-linear ops (matmul, convolution) are denser than element-wise ones. With
# `DTROptions(partition=True)` a tensor below `CHEAP_DENSITY` cost units per byte is
# allocated from the bottom of the arena, any other from the top (`PartitionedArena`).
#
# A hand-written program (the runtime's plain input, `program.py`; `hand_program` in
# `minigraph/lessons/l07c.py` builds one) shows it. A chain `x -> a -> b -> c -> d -> e`:
# `a` and `c` cost 10 for 100 bytes, `b` and `d` 1000, and `e` needs 200 bytes of a
# 400-byte arena that `a`..`d` fill. The window here sums each tensor's own cost only, so
# its choice can be checked by hand.

# %%
sizes = dict(x=0, a=100, b=100, c=100, d=100, e=200)
costs = dict(a=10.0, b=1000.0, c=10.0, d=1000.0, e=1.0)
ops = chain_ops(costs)
before, evicted = {}, {}
for partition in (False, True):
    opts = dict(heuristic_args=OWN_COST, defrag="last-resort", partition=partition)
    first4 = DTRRuntime(hand_program(sizes, ops[:4], [("call", k) for k in range(4)]),
                        400, "coop", **opts)
    first4.run()
    before[partition] = layout(first4)
    run = DTRRuntime(hand_program(sizes, ops, [("call", k) for k in range(5)]), 400,
                     "coop", **opts).run()
    evicted[partition] = run.evicted
    print(f"partition={partition}: before E {[(at, t) for at, _, t in before[partition]]}; "
          f"the window evicts {run.evicted}, cost {sum(costs[t] for t in run.evicted):g}")
print(f"cheap below {CHEAP_DENSITY} cost units per byte: a and c "
      f"({10 / 100} per byte) are cheap, b and d ({1000 / 100} per byte) are not")
assert [t for _, _, t in before[False]] == ["a", "b", "c", "d"]
assert [t for _, _, t in before[True]] == ["a", "c", "d", "b"]
assert evicted[False] == ["a", "b"] and evicted[True] == ["a", "c"]

# %% [markdown]
# The picture: the 400-byte arena just before `E` runs, first fit above and the
# partitioned arena below. Light blocks are cheap, dark ones dear; the window's choice is
# hatched, and `d`, `E`'s input, is pinned.

# %%
fig, ax = plt.subplots(figsize=(7, 2.2), layout="constrained")
for row, partition in enumerate((True, False)):
    for at, n, t in before[partition]:
        dear = costs[t] / sizes[t] >= CHEAP_DENSITY
        ax.barh(row, n, left=at, color="#1f4e79" if dear else "#9ecae1", edgecolor="black",
                hatch="//" if t in evicted[partition] else None)
        ax.text(at + n / 2, row, f"{t}\n{costs[t]:g}", ha="center", va="center",
                color="white" if dear else "black")
ax.set_yticks([0, 1], ["partitioned", "first fit"])
ax.set_xlabel("address (bytes)")
ax.set_xlim(0, 400)
ax.set_title("the arena before E (tensor, cost); hatched: evicted for e")
plt.show()

# %% [markdown]
# First fit lays the tensors out in the order they were made, so every pair of
# neighbours holds a dear tensor (`d` is pinned), and the cheapest window costs a dear
# tensor plus a cheap one: 1010. The partitioned arena has put `a` and `c` side by side
# at the bottom: the window evicts the two cheap ones for 20, and both dear tensors stay.
#
# ## 2. In place, but recomputable
#
# DTR runs every op out of place: `b = relu(a)` gets a second block while `a` is still
# resident, and `a`'s block becomes a hole a moment later. With
# `DTROptions(recomputable_inplace=True)` Coop writes such an op in place instead: `b`
# takes `a`'s block and `a` is marked evicted, so a recomputation that needs `a` re-runs
# `a`'s producer (`coop_inplace.py`; which pairs may share follows lesson 03's rules).
# Fewer holes, fewer evictions forced by them. On lesson 07bb's LSTM training step, at
# 0.8 of the total and with compaction off, each idea alone and the two together:

# %%
lstm = get_model("lstm", T=16, hidden=32, batch=256, input=16).graph
variants = [("dtr", {}), ("dtr + in-place", dict(recomputable_inplace=True)),
            ("coop (window only)", {}), ("coop + partition", dict(partition=True)),
            ("coop + in-place", dict(recomputable_inplace=True)),
            ("coop + partition + in-place", dict(partition=True, recomputable_inplace=True))]
counts = {}
for shown, opts in variants:
    t = simulate(lstm, ratio=0.8, heuristic=shown.split()[0], defrag="last-resort",
                 timeline=False, **opts)
    counts[shown] = (t.evictions, t.frag_forced_evictions, t.overhead)
show_table(["variant (LSTM, 0.8 of total)", "evictions", "fragmentation-forced", "compute"],
           [[k, e, f, f"x{o:.3f}"] for k, (e, f, o) in counts.items()])
forced_of = {k: v[1] for k, v in counts.items()}
window = forced_of["coop (window only)"]
assert window < forced_of["dtr"]
assert forced_of["dtr + in-place"] < forced_of["dtr"] and forced_of["coop + in-place"] < window
assert counts["coop + partition"][0] > counts["coop (window only)"][0]
assert counts["coop + partition"][2] > counts["coop (window only)"][2]
assert forced_of["coop + partition + in-place"] == min(forced_of.values())

# %% [markdown]
# Read the table down its middle column. The window alone makes fewer forced evictions
# than `dtr`; in-place lowers the count for `dtr` and for `coop`; the two layout ideas
# together make the fewest (each asserted above). The partition alone, though, raises the
# evictions and the compute: its two regions grow towards each other, and where they
# meet a window may have to take dear tensors too. Neither idea wins everywhere:
# `python benchmarks/dtr.py --coop` runs the variants in real mode on the zoo models
# (`benchmarks/RESULTS.md`).
#
# ## Exercise
#
# **1.** Lay it out yourself. `l07c.exercise_1_program()` is the chain
# `x -> a -> b -> c -> d -> e -> f -> g` in a 600-byte arena: `a`..`f` take 100 bytes
# each and fill it, and `g` needs 200. Their costs are below. With `partition=True`, which
# tensors does Coop's window evict to make room for `g`? Work it out by hand first (where
# does each tensor lie?), then check with `DTRRuntime(..., "coop", partition=True)` as in
# section 1. Put the list of names in `ANSWER_1`.

# %%
print("bytes", {t: l07c.EXERCISE_1_SIZES[t] for t in "abcdefg"})
print("costs", {t: l07c.EXERCISE_1_COSTS[t] for t in "abcdef"}, "arena", l07c.EXERCISE_1_ARENA, "B")

ANSWER_1 = None      # e.g. ["a", "b"]

# %%
check_answers({1: (ANSWER_1, l07c.exercise_1)})

# %% [markdown]
# ## Summary
#
# * A new tensor needs free bytes side by side, so which tensors can go depends on where
#   they lie; Coop's window evicts the cheapest run of neighbours.
# * Cheap-tensor partitioning (`partition=True`) puts the cheap tensors next to each
#   other, so a window of them is there to take.
# * Recomputable in-place (`recomputable_inplace=True`) leaves fewer holes: the
#   overwritten input counts as evicted and can be recomputed.
# * Neither is a free win; together they make the fewest fragmentation-forced evictions
#   on the LSTM here.
# * Lesson 07d swaps tensors out instead of recomputing them; lesson 07e sets DTR beside
#   static checkpointing and asks how a runtime should choose its policy.

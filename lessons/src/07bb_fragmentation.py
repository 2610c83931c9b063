# %% [markdown]
# # 07bb · Memory has addresses: fragmentation under DTR, and compaction
#
# **The idea.** DTR's score counts bytes: evicting a tensor of 20 bytes frees 20 bytes. A
# real arena has *addresses*. An output of S bytes needs one free block of S bytes, and free
# bytes scattered in holes do not add up (lesson 09's first fit). A score that does not look
# at addresses may evict a tensor whose bytes land far from any hole, and the output still
# does not fit: more evictions follow, and each may cost a recomputation later. These are
# **fragmentation-forced evictions**: evictions made although the free bytes already
# sufficed. There are two ways out. Choose victims by where they lie (MegEngine's score
# counts the free bytes beside a block; Coop evicts a contiguous window), or move the
# resident tensors together, **compaction**, so that the free bytes become one hole.
#
# **Source.** MegEngine's DTR [MegEngine 2021] (`get_free_left_and_right`, defragmentation
# since v1.7), Coop's sliding window over the arena [Zhang 2023]. The code:
# `FirstFitArena` in `minigraph/memory/online/arena.py` (its `free_around` and `compact`),
# and the engine room of `minigraph/runtime/dtr/` (`allocator.py`, `room.py`: when to
# evict and when to compact, `DTROptions.defrag`).

# %%
import sys
from pathlib import Path

try:
    import minigraph as mg
except ModuleNotFoundError:          # a clone without `pip install -e .`: use the repo
    sys.path.insert(0, str(Path.cwd().parent))
    import minigraph as mg

from IPython.display import Markdown, display
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from minigraph.lessons import check_answers, l07bb
from minigraph.memory.online.arena import FirstFitArena
from minigraph.models import get_model
from minigraph.runtime.dtr import simulate


def show_table(header, rows):
    """Render rows (lists of cells) as a Markdown table under the cell."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    display(Markdown("\n".join(lines)))

# %% [markdown]
# ## 1. Enough free bytes, no block big enough
#
# A 100-byte arena holds three tensors, a, b and c, with two 20-byte holes. The next
# output needs `REQUEST` bytes. Each line of the cell describes the arena after one step:
# first as it is; then after a byte-blind score has evicted a (say it is the stalest: the
# score does not know where a lies); then after evicting c instead; then, with no eviction,
# after compaction (`FirstFitArena.compact` slides every block to the left).

# %%
REQUEST = 30


def arena_abc():
    arena = FirstFitArena(100)
    at = {k: arena.alloc(n, k) for k, n in zip("abwcx", (20, 10, 20, 30, 20))}
    for k in "wx":                    # two tensors released: two holes
        arena.free(at.pop(k))
    return arena, at


def describe(label, arena):
    print(f"{label:22} free {arena.free_bytes} B, largest hole {arena.largest_free()} B, "
          f"a {REQUEST} B output fits: {arena.can_fit(REQUEST)}")
    return label, list(arena.blocks()), arena.can_fit(REQUEST)


before, at = arena_abc()
steps = [describe("as it is", before)]
print("free bytes left and right of each block:",
      {k: before.free_around(at[k]) for k in at})
for victim in "ac":
    arena, at = arena_abc()
    arena.free(at[victim])
    steps.append(describe(f"{victim} evicted", arena))
compacted, _ = arena_abc()
moves = compacted.compact()
steps.append(describe("compacted (no eviction)", compacted))
print("compaction copies", sum(size for *_, size in moves), "B:", moves)
fits = [before.free_bytes >= REQUEST, *(s[2] for s in steps)]
assert fits == [True, False, False, True, True]

# %%
fig = Figure(figsize=(9, 3), layout="constrained")
ax = fig.subplots()
for row, (_, blocks, _) in enumerate(reversed(steps)):
    for start, size, owner in blocks:
        ax.add_patch(Rectangle((start, row), size, 0.7, edgecolor="black",
                               facecolor="white" if owner is None else "#4c72b0"))
        ax.text(start + size / 2, row + 0.35, owner or f"{size} B free", ha="center",
                va="center", color="black" if owner is None else "white", fontsize=8)
ax.set_yticks([r + 0.35 for r in range(len(steps))], [s[0] for s in reversed(steps)])
ax.set_xlim(0, before.capacity), ax.set_ylim(-0.2, len(steps))
ax.set_xlabel("address (B)")
ax.set_title(f"the output needs one free block of {REQUEST} B", fontsize=9)
fig

# %% [markdown]
# As it is, the free bytes suffice but no hole does (asserted). Evicting a frees bytes at
# the left edge, next to nothing free: still no block big enough, so that eviction was
# forced by fragmentation, and the score must evict again. Evicting c joins both holes
# into one: `free_around` gives the free bytes left and right of a block, and MegEngine's
# `eval_func` divides by bytes plus those free neighbours, so among tensors alike in cost
# and staleness it prefers c. Compaction needs no eviction at all; it pays by copying the
# blocks it moves (the bytes printed).
#
# ## 2. On a real run: forced evictions, and what compaction removes
#
# An LSTM's training step under DTR, in a first-fit arena, at three budgets. With
# `defrag="last-resort"` the runtime evicts by the score and compacts only when nothing is
# left to evict; the default, `defrag="first"`, compacts as soon as the free bytes would
# suffice, as MegEngine does. The scores: h_DTR, LRU, MegEngine's (with its free-neighbour
# term), and Coop's contiguous windows. The table gives each run's compute overhead:

# %%
lstm = get_model("lstm", T=16, hidden=32, batch=256, input=16).graph
RATIOS = (0.9, 0.8, 0.7)
RUNS = {"dtr": ("dtr", "last-resort"), "lru": ("lru", "last-resort"),
        "megengine": ("megengine", "last-resort"), "coop": ("coop", "last-resort"),
        "dtr + compaction first": ("dtr", "first")}
runs = {}
for label, (h, defrag) in RUNS.items():
    for r in RATIOS:
        try:
            runs[label, r] = simulate(lstm, ratio=r, heuristic=h, defrag=defrag)
        except (mg.ThrashError, mg.BudgetError) as e:
            runs[label, r] = type(e).__name__
cell = {k: f"x{v.overhead:.3f}" if not isinstance(v, str) else v for k, v in runs.items()}
show_table(["score", *(f"ratio {r}" for r in RATIOS)],
           [[label, *(cell[label, r] for r in RATIOS)] for label in RUNS])

# %% [markdown]
# Where did the evictions go? For each score, the evictions of its runs that finished,
# split into those forced by fragmentation (`trace.frag_forced_evictions`) and the rest:

# %%
done = {k: v for k, v in runs.items() if not isinstance(v, str)}
total = {label: sum(v.evictions for (l, _), v in done.items() if l == label) for label in RUNS}
forced = {label: sum(v.frag_forced_evictions for (l, _), v in done.items() if l == label)
          for label in RUNS}
for label in RUNS:
    print(f"{label:24} {total[label]:4} evictions, {forced[label]:4} forced by fragmentation")
moved = sum(v.moved_bytes for (l, _), v in done.items() if l == "dtr + compaction first")
print(f"compaction first copied {moved:,} B in all, over its {len(RATIOS)} runs")
fig = Figure(figsize=(8, 3), layout="constrained")
ax = fig.subplots()
xs = range(len(RUNS))
ax.bar(xs, [forced[k] for k in RUNS], color="#d62728", label="forced by fragmentation")
ax.bar(xs, [total[k] - forced[k] for k in RUNS], bottom=[forced[k] for k in RUNS],
       color="#4c72b0", label="the others")
ax.set_xticks(list(xs), list(RUNS), fontsize=8)
ax.set_ylabel("evictions (runs that finished)")
ax.legend()
assert forced["dtr + compaction first"] == 0, "with compaction first no eviction is forced"
assert all(forced[k] > 0 for k in ("dtr", "lru", "megengine", "coop"))
assert all(runs["dtr + compaction first", r].overhead < runs["dtr", r].overhead for r in RATIOS)
fig

# %% [markdown]
# With compaction only as a last resort, every score makes forced evictions, MegEngine's
# free-neighbour term and Coop's windows too (asserted in the cell): an eviction is
# forced whenever the free bytes already sufficed, so each tensor of a window Coop evicts
# then counts as forced, though compaction would have needed none. With compaction first
# none is forced (asserted), and h_DTR's overhead falls at every budget of the table
# (asserted); the price is the bytes copied (printed). That is why this runtime compacts
# first by default.

# %% [markdown]
# ## Exercise
#
# **1.** The arena printed below holds five tensors and two holes. Which single tensor
# would you evict so that an output of `l07bb.REQUEST_1` bytes fits? Put its name in
# `ANSWER_1` (`arena1.free_around(offset)` gives the free bytes left and right of a block).

# %%
arena1, offsets1 = l07bb.exercise_1_arena()
print("exercise 1's arena (offset, bytes, owner):", list(arena1.blocks()),
      f"- the output needs {l07bb.REQUEST_1} bytes")

ANSWER_1 = None      # e.g. "p"

# %%
check_answers({1: (ANSWER_1, l07bb.exercise_1)})

# %% [markdown]
# ## Summary
#
# * A score counts bytes; an arena has addresses. An eviction made while the free bytes
#   already sufficed is forced by fragmentation.
# * Looking at addresses (MegEngine's free neighbours, Coop's windows) does not remove
#   forced evictions; compaction does, at the price of copying resident tensors.
# * Next, lesson 07c: Coop's layout, where a tensor lies deciding what goes.

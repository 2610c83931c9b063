# %% [markdown]
# # 04 · Sharing memory without losing parallelism: colouring
#
# **Goal.** See why sharing bytes can serialise a graph that could run in parallel, count
# the damage (*parallel hazards*), and trade bytes for parallelism with the MXNet note's
# heuristic [Chen 2016]: colour the longest paths and share only within a colour.
#
# **Source.** MXNet's memory note [Chen 2016], "Memory Allocation for Parallel Operations", "Be
# Correct and Safe First" and "Try to Allow More Parallelization"; nnvm's memory pass
# [NNVM 2016] for section 5. The code is `minigraph/memory/coloring.py` (the colourings),
# `minigraph/memory/safe_sharing.py` (safe mode) and `MemoryPlan.parallel_hazards` in
# `minigraph/memory/plan.py`; read them beside this lesson.

# %%
import sys
from pathlib import Path

try:
    import minigraph as mg
except ModuleNotFoundError:          # a clone without `pip install -e .`: use the repo
    sys.path.insert(0, str(Path.cwd().parent))
    import minigraph as mg

from matplotlib.figure import Figure

from minigraph import examples
from minigraph.feeds import random_feeds
from minigraph.lessons import check_answers, l04
from minigraph.memory import color_nodes
from minigraph.models import get_model
from minigraph.viz import plot_layout

OPTS = mg.MemoryOptions(planner="refcount", alignment=1)

# %% [markdown]
# ## 1. Four branches that could run side by side
#
# One input, four independent chains (a matmul and three activations each), joined at
# the end. Run in program order, branch 1 runs completely before branch 2 starts.

# %%
g = examples.branchy(branches=4, depth=3)
mg.draw(g, show_tensors=False)

# %% [markdown]
# ## 2. Sharing creates dependencies
#
# The refcount planner (lesson 03) lets branch 2 reuse the bytes branch 1 has freed.
# Sequentially that is fine. But run the branches on two streams at once and branch 2
# could overwrite a tensor of branch 1 that branch 1 has not read yet. The MXNet note [Chen 2016]:
# "the two plans are both fine if A[1]..A[8] run in order; in parallel, the right one is better".
#
# `plan.parallel_hazards(graph)` lists the pairs (a, b) sharing bytes where b's producer
# is not ordered after every reader of a *by the graph's edges*: only the schedule keeps
# them apart.

# %%
one = mg.plan_memory(g, OPTS)
hazards = one.plan.parallel_hazards(g)
print(one.summary())
print(len(hazards), "hazards, e.g.", hazards[:4])
plot_layout(one, color_by="block")

# %% [markdown]
# ## 3. Colour the longest paths
#
# The MXNet note's heuristic [Chen 2016]: find the longest path (here: the most bytes written), give
# its nodes colour 0; find the longest path among the rest, colour 1; ... After k-1 paths
# every remaining node takes the last colour. Bytes are only shared within a colour, so
# two coloured paths never wait on each other's memory. Each path is one pass over the
# nodes in order: O(k n), against O(n^2) for the exact ancestor test.

# %%
live = mg.liveness(g, alignment=1)
for k in (2, 3, 4):
    colour = color_nodes(g, live, k)
    paths = {c: [n for n in live.schedule if colour[n] == c] for c in range(k)}
    print(f"k={k}:", "; ".join(f"colour {c}: {' '.join(ns)}" for c, ns in paths.items()))

# %% [markdown]
# More colours, fewer hazards, more bytes:

# %%
rows = []
for k in (1, 2, 3, 4):
    r = mg.plan_memory(g, OPTS.replace(colors=k))
    rows.append((k, len(r.plan.parallel_hazards(g)), r.arena_bytes))
    print(f"{k} colour(s): {rows[-1][1]:2d} hazards, arena {rows[-1][2]:6d} B")
assert rows[-1][1] == 0 and all(a[1] > b[1] and a[2] < b[2] for a, b in zip(rows, rows[1:]))

fig = Figure(figsize=(8, 3), layout="constrained")
ax1 = fig.subplots()
ax1.plot([r[0] for r in rows], [r[2] for r in rows], "o-", color="#d62728")
ax1.set_xlabel("colours (k)")
ax1.set_ylabel("arena bytes", color="#d62728")
ax2 = ax1.twinx()
ax2.plot([r[0] for r in rows], [r[1] for r in rows], "s--", color="#1f5fbf")
ax2.set_ylabel("parallel hazards", color="#1f5fbf")
ax1.set_xticks([r[0] for r in rows])
fig

# %% [markdown]
# With four colours every branch has its own memory: no hazard left (the last printed
# line), at the price of four branches' bytes. The arena per colour is planned separately and the colours are
# stacked; the plan still passes the same validator, and runs to the same bits:

# %%
feeds = random_feeds(g)
reference = mg.Executor(g).run(feeds)
for k in (1, 4):
    r = mg.plan_memory(g, OPTS.replace(colors=k))
    got = mg.Executor(g, r.plan).run(feeds)
    print(f"k={k}: same result bit for bit:",
          all(reference[o].tobytes() == got[o].tobytes() for o in reference))
plot_layout(mg.plan_memory(g, OPTS.replace(colors=4)), color_by="block")

# %% [markdown]
# ## 4. A heuristic, not a guarantee
#
# The MXNet note [Chen 2016] calls colouring "a special case of the ancestor condition". It is not
# quite: a path's colour says nothing of readers *off* the path. In this small training graph
# the hazards fall with more colours, then stop falling: look at the last lines.

# %%
with mg.name_scope():
    x = mg.input("x", (4, 8))
    w = mg.param("W", (8, 8))
    h = mg.relu(x @ w)
    train = mg.training_graph(mg.sum(mg.sigmoid(h) * mg.tanh(h)), [w], lr=0.1)
counts = {}
for k in (1, 2, 3, 4, 8):
    r = mg.plan_memory(train, OPTS.replace(inplace=True, colors=k))
    hazards = r.plan.parallel_hazards(train)
    counts[k] = len(hazards)
    print(f"{k} colour(s): {len(hazards):2d} hazards, arena {r.arena_bytes} B")
print("left with 8 colours:", hazards)
assert counts[8] == counts[4] > 0

# %% [markdown]
# Why does one stay? Take the first pair left, (a, b): b's bytes go over a's. Both lie on
# the same coloured path, so sharing is allowed. But one of a's readers is off that path,
# and no edge of the graph orders it before b's producer: run in parallel, b could
# overwrite a before that reader has read it.

# %%
def ancestors(graph, node):
    """Every node that `node` depends on through the graph's edges (the tensors it reads
    and its control dependencies, lesson 01)."""
    seen, todo = set(), [node]
    while todo:
        n = graph.node(todo.pop())
        before = [graph.tensors[t].producer for t in n.inputs] + list(n.deps)
        for p in before:
            if p is not None and p not in seen:
                seen.add(p)
                todo.append(p)
    return seen


a, b = hazards[0]
colour = color_nodes(train, mg.liveness(train, alignment=1), 8)
writer = train.tensors[b].producer
print(f"{b} (made by {writer}, colour {colour[writer]}) goes over {a} "
      f"(colour {colour[train.tensors[a].producer]})")
ordered = {}
for reader in train.consumers[a]:
    ordered[reader] = reader in ancestors(train, writer)
    print(f"  {a} is read by {reader:15} colour {colour[reader]}, "
          f"ordered before {writer} by the edges: {ordered[reader]}")
assert colour[writer] == colour[train.tensors[a].producer] and not all(ordered.values())
assert all(colour[r] != colour[writer] for r, ok in ordered.items() if not ok)

# %% [markdown]
# The reader marked `False` has another colour: it is off the path, so the path's colour
# cannot keep it apart, and with more colours nothing changes (every node already has a
# path). Only the exact ancestor test, which `parallel_hazards` runs, sees it.

# %% [markdown]
# ## 5. nnvm's colouring: count nodes, walk through coloured nodes
#
# nnvm's memory pass [NNVM 2016] (`ColorNodeGroup` in `src/pass/plan_memory.cc`, the code
# behind the MXNet note) measures a path in two other ways than section 3:
#
# - every op is worth 1, whatever it writes (section 3 counts bytes);
# - once a path is coloured its nodes are worth 0, but a later path may still *walk
#   through* them and colour the uncoloured nodes on both sides (section 3 searches the
#   uncoloured nodes only). Ties go to the node latest in the schedule.
#
# `MemoryOptions(coloring="nnvm")` picks it; `"bytes"` is section 3's, the default. A chain
# with two side ops shows the second difference: `s1` joins the chain at `c2`, `s2` leaves
# it there.

# %%
side = l04.chain_with_sides()
live_side = mg.liveness(side, alignment=1)
side_colours = {}
for name in ("bytes", "nnvm"):
    side_colours[name] = color_nodes(side, live_side, 3, name)
    print(f"k=3, {name:5}:", ", ".join(f"{n} {side_colours[name][n]}"
                                       for n in live_side.schedule))
assert side_colours["nnvm"]["s1"] == side_colours["nnvm"]["s2"] == 1
assert side_colours["bytes"]["s1"] != side_colours["bytes"]["s2"]

# %% [markdown]
# Both find the chain first. nnvm's second path is `s1 -> c2 -> s2`: `c2` keeps colour 0,
# but the path carries `s1` and `s2` into colour 1 together. Among uncoloured nodes only,
# `s1` and `s2` are not linked, so the bytes variant gives colour 1 to one of them and
# leaves the other to the last colour.
#
# Does it matter for hazards and bytes? The four branches, section 4's training graph and
# two zoo training graphs (refcount; the last three with in-place, as MXNet plans them):

# %%
cases = {"branchy": (g, OPTS), "train": (train, OPTS.replace(inplace=True)),
         "cnn": (get_model("cnn").graph, OPTS.replace(inplace=True)),
         "lstm": (get_model("lstm").graph, OPTS.replace(inplace=True))}
table = {}
print(f"{'graph':8} {'colouring':14} {'hazards':>7} {'arena (B)':>10}")
for case, (graph, opts) in cases.items():
    variants = {"k=1": opts, **{f"k={k} {c}": opts.replace(colors=k, coloring=c)
                                for k in (2, 4) for c in ("bytes", "nnvm")}}
    for variant, o in variants.items():
        r = mg.plan_memory(graph, o)
        table[case, variant] = (len(r.plan.parallel_hazards(graph)), r.arena_bytes)
        print(f"{case:8} {variant:14} {table[case, variant][0]:7d} "
              f"{table[case, variant][1]:10d}")
assert all(table["branchy", f"k={k} bytes"] == table["branchy", f"k={k} nnvm"] for k in (2, 4))
assert any(table[c, "k=4 bytes"] != table[c, "k=4 nnvm"] for c in cases)
assert all(table[c, f"k=4 {v}"][0] > 0 for c in ("train", "cnn", "lstm")
           for v in ("bytes", "nnvm"))

# %% [markdown]
# On the four equal branches the two agree (a branch is the longest path by nodes and by
# bytes). Elsewhere they pick other paths and trade hazards for bytes differently; the
# last assertions check that the two differ somewhere and that with four colours neither
# removes every hazard on the training graphs: colouring is a heuristic either way.

# %% [markdown]
# ## 6. Safe mode: zero hazards, and what it costs
#
# The MXNet note's "Be Correct and Safe First" [Chen 2016]: never share between nodes that
# can run in parallel. `MemoryOptions(safe=True)` lets tensor b take a's bytes only when
# every use of a (its producer and its readers) is ordered before b's producer by the
# graph's edges: exactly the test `parallel_hazards` runs. A planner only sees lifetimes,
# so safe mode plans twice and keeps the smaller arena:
#
# - **classes**: put each buffer in the first class where everything already dead before
#   it is born is an ancestor of it; classes never share bytes, so any planner is safe;
# - **rounds**: plan, find the hazards, stretch the life of a hazard's first tensor to the
#   second's birth (they now overlap, so no planner shares them), plan again, until none
#   is left (after many rounds, a bound proven safe for any planner takes over).
#
# In-place hand-overs are kept only where the input's other readers are ordered before
# the op. The plan's note says which way won:

# %%
safe_rows = {}
print(f"{'graph':8} {'k=1 arena':>10} {'safe arena':>10} {'cost':>7} hazards  note")
for case, (graph, opts) in cases.items():
    r = mg.plan_memory(graph, opts.replace(safe=True))
    hz = len(r.plan.parallel_hazards(graph))
    safe_rows[case] = (hz, r.arena_bytes)
    base_bytes = table[case, "k=1"][1]
    print(f"{case:8} {base_bytes:10d} {r.arena_bytes:10d} "
          f"{r.arena_bytes / base_bytes:6.2f}x {hz:7d}  {r.plan.note}")
assert all(h == 0 for h, _ in safe_rows.values())
four = [table["lstm", f"k=4 {v}"] for v in ("bytes", "nnvm")]
assert all(abs(safe_rows["lstm"][1] / b - 1) < 0.02 and h > 0 for h, b in four)

# %% [markdown]
# No hazard is left anywhere (first assertion), at the cost printed in the `cost` column.
# Safe mode is not always much dearer than colouring: on the LSTM its arena is within 2%
# of what four colours of either kind need, and those still leave hazards (second
# assertion). A safe plan runs to the same bits as the run without any sharing:

# %%
for case in ("branchy", "train"):
    graph, opts = cases[case]
    feeds = random_feeds(graph)
    got = mg.Executor(graph, mg.plan_memory(graph, opts.replace(safe=True)).plan).run(feeds)
    ref = mg.Executor(graph).run(feeds)
    same = all(ref[o].tobytes() == got[o].tobytes() for o in ref)
    print(f"{case}: safe plan, same result bit for bit: {same}")
    assert same

# %% [markdown]
# ## Exercises
#
# **1.** How many colours does `examples.branchy(branches=3, depth=3)` need for zero
# parallel hazards with refcount (alignment 1)? Put the smallest k in `ANSWER_1`.
#
# **2.** For `examples.branchy(branches=4, depth=3)` with refcount and **in-place on**
# and one colour, how many parallel hazards are there? Put the number in `ANSWER_2`
# (then explain it to yourself: what does in-place do to each branch?).
#
# **3.** The heaviest path is colour 0. In section 4's training graph `train` with k=2,
# how many nodes lie on colour 0's path? Count them with code (`color_nodes`) and put the
# number in `ANSWER_3`.
#
# **4.** How many bytes does safe mode add to the refcount plan (alignment 1) of
# `examples.branchy(branches=3, depth=3)`? Put the difference of the two arenas in
# `ANSWER_4`, then say why no branch may reuse another's bytes.
#
# **5.** Write the exact test yourself: `my_hazards(graph, plan)` returns the parallel
# hazards of a plan, the pairs (a, b) where b's bytes go over a's later in the schedule
# (or b is a's in-place successor) and some use of a - its producer or a reader - is not
# ordered before b's producer by the graph's edges. `ancestors(graph, node)` (section 4)
# gives the edges' order; `plan.offsets[t]`, `plan.size(t)`, `plan.liveness.intervals[t]`
# (`start`, `end`) and `plan.inplace` give the plan. Set `ANSWER_5 = my_hazards`; the
# check compares it with `plan.parallel_hazards(graph)` on four plans.

# %%
ANSWER_1 = None   # number of colours
ANSWER_2 = None   # number of hazards
ANSWER_3 = None   # number of nodes
ANSWER_4 = None   # bytes


def my_hazards(graph, plan):
    """[(a, b), ...]: the pairs sharing bytes that the graph leaves unordered."""
    raise NotImplementedError      # replace this line


ANSWER_5 = None   # then: ANSWER_5 = my_hazards

# %%
check_answers({1: (ANSWER_1, l04.exercise_1), 2: (ANSWER_2, l04.exercise_2),
               3: (ANSWER_3, l04.exercise_3), 4: (ANSWER_4, l04.exercise_4),
               5: (ANSWER_5, l04.exercise_5)})

# %% [markdown]
# ## Summary
#
# - Shared bytes are a hidden dependency: a schedule that runs branches in parallel can
#   overwrite a tensor before its reader runs. `parallel_hazards` counts such pairs.
# - Colouring k-1 longest paths and sharing only within a colour trades bytes for
#   parallelism in O(k n): more colours, fewer hazards, more bytes.
# - It is a heuristic: readers off a path are not seen, so a colour is no proof of
#   safety; the exact test is the ancestor relation (what `parallel_hazards` computes).
# - nnvm's colouring [NNVM 2016] counts nodes instead of bytes and lets later paths walk
#   through coloured nodes (`coloring="nnvm"`); a heuristic too.
# - Safe mode (`safe=True`) uses the exact test: zero hazards, paid for in bytes.
# - Next: lesson 05 - GE's block reuse; then 05b - choosing the schedule.

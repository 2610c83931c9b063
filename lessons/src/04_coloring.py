# %% [markdown]
# # 04 · Sharing memory without losing parallelism: colouring
#
# **Goal.** See why sharing bytes can serialise a graph that could run in parallel, count
# the damage (*parallel hazards*), and trade bytes for parallelism with the MXNet note's
# heuristic [Chen 2016]: colour the longest paths and share only within a colour.
#
# **Source.** MXNet's memory note [Chen 2016], "Memory Allocation for Parallel Operations", "Be
# Correct and Safe First" and "Try to Allow More Parallelization". The code is
# `minigraph/memory/coloring.py` and `MemoryPlan.parallel_hazards` in
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
from minigraph.lessons import check_answers
from minigraph.memory import color_nodes
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
# With four colours every branch has its own memory: zero hazards, at the price of four
# branches' bytes. The arena per colour is planned separately and the colours are
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
# quite: a path's colour says nothing of readers *off* the path. In this small training graph,
# two colours give *more* hazards than one; three fewer.

# %%
with mg.name_scope():
    x = mg.input("x", (4, 8))
    w = mg.param("W", (8, 8))
    h = mg.relu(x @ w)
    train = mg.training_graph(mg.sum(mg.sigmoid(h) * mg.tanh(h)), [w], lr=0.1)
for k in (1, 2, 3):
    r = mg.plan_memory(train, OPTS.replace(inplace=True, colors=k))
    print(f"{k} colour(s): {len(r.plan.parallel_hazards(train)):2d} hazards, "
          f"arena {r.arena_bytes} B")

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
# **3.** The heaviest path is colour 0. In `examples.branchy(branches=4, depth=3)` with
# k=2, which node is *first* in colour 0's path? Put its name in `ANSWER_3`.

# %%
ANSWER_1 = None   # number of colours
ANSWER_2 = None   # number of hazards
ANSWER_3 = None   # a node name

# %%
def check_1(answer):
    g3 = examples.branchy(branches=3, depth=3)
    right = next(k for k in range(1, 10) if not mg.plan_memory(
        g3, OPTS.replace(colors=k)).plan.parallel_hazards(g3))
    return answer == right, f"{right} colours"


def check_2(answer):
    r = mg.plan_memory(g, OPTS.replace(inplace=True))
    right = len(r.plan.parallel_hazards(g))
    return answer == right, (f"{right} hazards: each branch is one in-place chain, one "
                             "buffer, shared with no other branch")


def check_3(answer):
    live = mg.liveness(g, alignment=1)
    colour = color_nodes(g, live, 2)
    right = next(n for n in live.schedule if colour[n] == 0)
    return answer == right, f"colour 0 starts at {right}"


check_answers({1: (ANSWER_1, check_1), 2: (ANSWER_2, check_2), 3: (ANSWER_3, check_3)})

# %% [markdown]
# ## Summary
#
# - Shared bytes are a hidden dependency: a schedule that runs branches in parallel can
#   overwrite a tensor before its reader runs. `parallel_hazards` counts such pairs.
# - Colouring k-1 longest paths and sharing only within a colour trades bytes for
#   parallelism in O(k n): more colours, fewer hazards, more bytes.
# - It is a heuristic: readers off a path are not seen, so a colour is no proof of
#   safety; the exact test is the ancestor relation (what `parallel_hazards` computes).
# - Next: lesson 05 - GE's block reuse and choosing the schedule.

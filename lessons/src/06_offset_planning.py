# %% [markdown]
# # 06 · Offset planning: strip packing, heuristics and the optimum
#
# **Goal.** Forget blocks: give every tensor any offset, as long as no two tensors alive at
# the same step overlap. That is the *dynamic storage allocation* problem (DSA), a 2D strip
# packing with fixed x positions: NP-hard. We try the heuristics (best-fit, greedy by size,
# simulated annealing), compute the optimum with an integer linear program (ILP) where it
# is small enough, and measure each heuristic's gap.
#
# **Sources.** Chainer-Opt's best-fit offset heuristic [Sekiyama 2018] and its picture of
# "offset lines", MODeL's [Steiner 2023] and ROAM's [Shu 2023] ILP for the memory layout
# and their integer program that chooses the order and the layout together (section 6),
# DSA-SA's simulated annealing over the allocation order [Imanishi 2024]. The code to read
# beside this lesson: `minigraph/memory/planners/greedy.py` (greedy by size and its
# lowest-gap rule), `minigraph/memory/planners/bestfit.py` (the skyline of offset lines),
# `minigraph/memory/planners/anneal.py` and `minigraph/memory/planners/ilp.py`; around them
# `minigraph/memory/planners/__init__.py` (the one planner interface, `register` and
# `plan_buffers`) and the one validator in `minigraph/memory/buffers.py`.

# %% [markdown]
# The planners "greedy-size" and "bestfit" run the same loops with faster indexes behind
# them (`planners/engine/boxes.py`, `planners/engine/skyline.py`), which change how fast a
# gap or a buffer is found, never which: "greedy-size:textbook" and "bestfit:textbook" give
# the same plans. "anneal" and "ilp" run the textbook's loop and model with a time limit
# over the whole call (`planners/engine/anneal.py`, `planners/engine/ilp.py`);
# "anneal:textbook" and "ilp:textbook" are the plain ones.
# The engine room also holds `engine/search.py`, a branch and bound that looks for the
# smallest arena and, when it finishes within its limits, proves it [Moffitt 2023]. Every
# planner has one signature: `planner(buffers, *, options) -> Placement`.

# %%
import sys
import time
from pathlib import Path

try:
    import minigraph as mg
except ModuleNotFoundError:          # a clone without `pip install -e .`: use the repo
    sys.path.insert(0, str(Path.cwd().parent))
    import minigraph as mg

from matplotlib.figure import Figure

from minigraph.memory import Buffer, theoretical_minimum
from minigraph.memory.buffers import Placement, arena_size, validate_offsets
from minigraph.memory.instances import hard_instance
from minigraph.memory.planners import PLANNERS, plan_buffers, register
from minigraph.memory.planners.joint import plan_joint
from minigraph.memory.planners.greedy import lowest_gap
from minigraph.experiments.techniques import compare_techniques
from minigraph.lessons import check_answers, l06
from minigraph.viz import explore_layout, plot_comparison, plot_placement

# %% [markdown]
# ## 1. A plan is a picture
#
# x = time (steps), y = address. Each tensor is a rectangle whose x extent is fixed by the
# schedule; a planner only chooses its height, the offset. A plan is valid when no two
# rectangles overlap; the arena is the top of the highest one. Here is a small training
# step planned by best-fit. Hover a block: its tensor, the op that produced it, its bytes,
# its life (first-last step) and its offset. Drag across a few steps, or use the slider
# under the picture, to zoom into a time range (what PyTorch's memory_viz offers for a
# GPU trace). The view is drawn with plotly in the browser, so it works without a
# kernel; where no script runs (GitHub's preview) or plotly is missing, the same cell
# shows a static picture instead.

# %%
from minigraph.models import get_model

cnn = get_model("cnn").graph
report = mg.plan_memory(cnn, mg.MemoryOptions(inplace=True, planner="bestfit"))
print(report.summary())
view = explore_layout(report)
print(view)
print("first blocks (the hover text's data):")
for block in view.blocks[:3]:
    print(f"   {block.tensor:12} op {block.op:22} {block.bytes:7d} B  "
          f"steps {block.start}-{block.end}  offset {block.offset}")
view

# %% [markdown]
# ## 2. The heuristics
#
# - **greedy by size** (`greedy-size`): largest tensors first, each at the lowest offset
#   free for its whole life.
# - **best-fit** (`bestfit`, Chainer-Opt): keep a set of "offset lines" (the tops of what is
#   placed); take the lowest line, place there the longest-lived tensor that fits under the
#   line's neighbours, or raise the line if none fits.
# - **annealing** (`anneal`, DSA-SA): a placement *order* decoded greedily; swap and move
#   tensors in the order, keep changes that shrink the arena (and, early on, some that do
#   not).
# - **ILP** (`ilp`, MODeL/ROAM): one offset variable per tensor, one binary per pair that
#   overlaps in time ("i below j or j below i"), minimise the arena. Exact, but the number
#   of pairs grows fast; here with a time limit.
#
# Real training graphs are kind to them: on zoo models the heuristics often reach the
# theoretical minimum. Count how often on a few (the last line):

# %%
reached, tried = 0, 0
for name in ("mlp", "cnn", "transformer"):
    g = get_model(name).graph
    print(f"-- {name}")
    for p in ("greedy-size", "bestfit", "anneal"):
        rep = mg.plan_memory(g, mg.MemoryOptions(inplace=True, planner=p))
        print(f"   {p:12} arena {rep.arena_bytes:8d} B  minimum {rep.theoretical_minimum:8d} B"
              f"  x{rep.ratio_to_minimum:.3f}")
        tried += 1
        reached += rep.arena_bytes == rep.theoretical_minimum
print(f"{reached} of {tried} plans reach the theoretical minimum")

# %% [markdown]
# ## 3. A hard instance
#
# `hard_instance(n)` cuts a rectangle of `capacity` bytes x some steps into `n` boxes by
# random guillotine cuts. The boxes tile the rectangle: at every step exactly `capacity`
# bytes are alive, so the theoretical minimum *and* the optimum are `capacity`. Whatever a
# planner needs beyond that is fragmentation it created.

# %%
CAPACITY = 4096
buffers = hard_instance(30, capacity=CAPACITY, seed=0, granule=64)
print(len(buffers), "buffers; theoretical minimum", theoretical_minimum(buffers), "B")
assert theoretical_minimum(buffers) == CAPACITY     # the boxes tile the rectangle

planners = ["none", "ge", "greedy-size", "bestfit", "anneal", "ilp"]
results = {}
for p in planners:
    # The ILP's work budget is the solver's node limit: the same answer on any machine at
    # any load (its time limit only guards against a hang).
    args = {"time_limit": 120.0, "node_limit": 20_000} if p == "ilp" else {}
    t0 = time.perf_counter()
    aligned, placement = plan_buffers(buffers, p, alignment=1, **args)
    seconds = time.perf_counter() - t0
    arena = placement.arena_bytes
    results[p] = (aligned, placement, arena, seconds)

optimum = CAPACITY                   # by construction
print(f"optimum {optimum} B; ILP: {results['ilp'][2]} B ({results['ilp'][1].note})")
print(f"{'planner':12} {'arena':>7} {'gap to optimum':>15} {'time':>9}")
for p, (_, placement, arena, seconds) in results.items():
    print(f"{p:12} {arena:7d} {100 * (arena - optimum) / optimum:14.1f}% "
          f"{seconds * 1000:7.1f} ms")

# %% [markdown]
# The pictures show where each heuristic leaves holes: the white space under the red line
# (red: the arena top; dashed: the theoretical minimum; one colour per buffer).

# %%
fig = Figure(figsize=(13, 7), layout="constrained")
axes = fig.subplots(2, 3).ravel()
for ax, p in zip(axes, planners):
    aligned, placement, arena, _ = results[p]
    plot_placement(aligned, placement, ax=ax, legend=False, labels=0, color_by="buffer",
                   title=f"{p}: {arena} B", unit="B")    # one unit in every panel
fig

# %% [markdown]
# ## 4. The ILP in a few lines
#
# For the tensors i and j whose lives overlap, either i lies below j or j below i:
# `x_i + s_i <= x_j + U(1 - z_ij)` and `x_j + s_j <= x_i + U z_ij`, with `z_ij` binary and
# U an upper bound (the best heuristic's arena). Minimise M subject to `x_i + s_i <= M`.
# The number of binaries is the number of overlapping pairs: that is what makes large
# graphs hard, and why `ilp` falls back to the best heuristic (and says so) beyond a limit.

# %%
def overlapping_pairs(bufs):
    return sum(1 for i, a in enumerate(bufs) for b in bufs[i + 1:] if a.overlaps_in_time(b))


print("pairs on the hard instance:", overlapping_pairs(buffers))
resnet_buffers = mg.liveness(get_model("resnet").graph).buffers()
print("pairs on a ResNet training step:", overlapping_pairs(resnet_buffers),
      f"({len(resnet_buffers)} tensors)")

# %% [markdown]
# ## 5. Every planner on one graph
#
# `compare_techniques` plans a graph once per planner of the registry (`slow=True` includes
# the ILP and annealing). Your own planner, once registered, appears here too.

# %%
rows = compare_techniques(get_model("transformer").graph, mg.MemoryOptions(inplace=True),
                          slow=True, time_limit=5.0)
for row in rows:
    print(row)
plot_comparison(rows, title="Transformer training step: every planner")

# %% [markdown]
# ## 6. Order and offsets together (MODeL)
#
# Every planner above is handed lives that an order has already fixed; lesson 05b's orders
# choose lives without looking at the layout. MODeL [Steiner 2023] solves both in one
# integer program (ROAM [Shu 2023] solves the same problem on large graphs, subgraph by
# subgraph): a binary `r[v,t]` says node v runs at step t, a tensor is alive at t when
# its producer has run and one of its readers has not, and two tensors alive at one step
# get the fixed-order ILP's "i below j or j below i" pair of binaries. Minimise the arena.
# The planner is `model-ilp` (`memory/planners/joint.py`). It takes the *graph*, not
# buffers, so it lives in a registry of its own, `JOINT_PLANNERS`; `plan_memory` asks it
# for the schedule first, and the plan's schedule is the one it chose, checked by the same
# validator as every plan. It starts from the best heuristic plan over lesson 05b's
# orders, stops at its time limit, and its note gives the best bound and the gap.
#
# First a graph made to fool every order: two branches, R1 -> R2 (small, then large) and
# L1 -> L2 (large, then small), joined at the end. The "best fixed order" is the exact
# fixed-order ILP (`ilp`) under every order of lesson 05b, the smallest kept. (One word,
# two things: the *order* named "program" is the order the nodes were built in, the
# first line below; MODeL's model is an *integer program*, which this lesson calls the
# ILP.)

# %%
from minigraph import examples
from minigraph.memory.planners import JOINT_PLANNERS
from minigraph.memory.topo import BEST_OF


def best_fixed_order(graph):
    """(arena, order) of the exact fixed-order ILP under every order of lesson 05b."""
    return min(((mg.plan_memory(graph, order=o, planner="ilp").arena_bytes, o)
                for o in BEST_OF), key=lambda row: row[0])      # ties: the first order


JOINT = mg.MemoryOptions(planner="model-ilp", planner_args={"time_limit": 10.0})
print("joint planners:", ", ".join(JOINT_PLANNERS))
trap = examples.order_trap()
for o in BEST_OF:
    rep = mg.plan_memory(trap, order=o, planner="ilp")
    print(f"   order {o:7} {' '.join(rep.plan.schedule):16} arena {rep.arena_bytes} B")
fixed, fixed_order = best_fixed_order(trap)
joint = mg.plan_memory(trap, JOINT)
print(f"model-ilp     {' '.join(joint.plan.schedule):16} arena {joint.arena_bytes} B")
print(joint.plan.note)
print(f"saved over the best fixed order ({fixed_order}): {fixed - joint.arena_bytes} B")
assert joint.arena_bytes < fixed

# %% [markdown]
# Every heuristic order runs R2 while L1 is alive (R first because it allocates less,
# or because it was built first); the schedule `model-ilp` chose runs L1 and L2 first, so
# L1 is dead before R2 is born. The note's bound is what no order can go below (here: node L2 holds L1 and
# L2 at once), so "optimal" is a proof, not a hope.
#
# The CANN article's worked example [Huawei GE] as a graph (`examples.ge_worked_graph`:
# A..E as matmuls, their lives those of section 1 of lesson 05, shifted by one step) and
# the zoo's MLP training step:

# %%
for name, graph in [("CANN worked example", examples.ge_worked_graph()),
                    ("zoo mlp", get_model("mlp").graph)]:
    fixed, fixed_order = best_fixed_order(graph)
    joint = mg.plan_memory(graph, JOINT)
    print(f"{name}: best fixed order {fixed_order} {fixed} B, model-ilp "
          f"{joint.arena_bytes} B, saved {fixed - joint.arena_bytes} B "
          f"({100 * (fixed - joint.arena_bytes) / fixed:.1f}%)")
    print("   ", joint.plan.note)
    assert joint.plan.note.startswith("optimal")
    assert (joint.arena_bytes == fixed) if name.startswith("CANN") else (joint.arena_bytes < fixed)

# %% [markdown]
# On the worked example the order has almost no freedom (only C, which reads a graph
# input, may move), and the ILP proves that no order beats the article's plan: it
# saves nothing, and says so. On the zoo MLP it finds an order none of lesson 05b's orders
# finds. Real runs of such a plan are bit for bit those of the unplanned run:

# %%
mlp = get_model("mlp")
joint = mg.plan_memory(mlp.graph, JOINT)
feeds = mlp.feeds()
plain, planned = mg.Executor(mlp.graph).run(feeds), mg.Executor(mlp.graph, joint.plan).run(feeds)
same = plain.keys() == planned.keys() and \
    all(plain[k].tobytes() == planned[k].tobytes() for k in plain)
print("schedule chosen:", " ".join(joint.plan.schedule[:6]), "...")
print("arena run equals the unplanned run:", same)
assert same

# %% [markdown]
# The price: n^2 schedule binaries, and a constraint per tensor pair and step. Planning
# time grows steeply with the graph. Here each graph gets a short time limit (printed
# above the table): a row that reaches it reports its gap instead of "optimal", and
# `benchmarks/plan_order_layout.py` runs longer:

# %%
sized = [("two-branch trap", trap), ("CANN worked example", examples.ge_worked_graph()),
         ("zoo mlp", mlp.graph)] + \
    [(f"mlp_training depth {d}", examples.mlp_training(depth=d, width=8, batch=2))
     for d in (1, 2, 3)]
LIMIT = 2.0
print(f"time limit {LIMIT:g} s per graph")
print(f"{'graph':22} {'nodes':>5} {'pairs':>5} {'start':>7} {'found':>7} {'bound':>7} "
      f"{'CPU s':>6}  result")
for name, graph in sorted(sized, key=lambda x: len(x[1].nodes)):
    t0 = time.process_time()
    jp = plan_joint(graph, alignment=512, time_limit=LIMIT)
    cpu = time.process_time() - t0
    print(f"{name:22} {len(graph.nodes):5d} {jp.pairs:5d} {jp.fixed_arena:7d} "
          f"{jp.arena_bytes:7d} {jp.bound:7d} {cpu:6.2f}  {jp.note.split(' over')[0]}")

# %% [markdown]
# ## Exercises
#
# **1.** Write a planner `first_fit_by_start(buffers)` that places buffers in order of
# their start step, each at the lowest offset free for its whole life (`lowest_gap(taken,
# size)` gives the lowest offset of `size` bytes avoiding the `(lo, hi)` byte ranges in
# `taken`). Return `Placement.of(buffers, offsets)` (it measures the arena). This is what
# an online allocator, which knows no future, can do.
#
# Take buffers in order of their start step, ties in the list's order (Python's `sorted`
# keeps it). Try it on the hard instance first: `validate_offsets(buffers, offsets)`
# raises if two tensors alive at once overlap.
#
# **2.** Register it (`register("first-fit-start")(first_fit_by_start)`), plan the zoo's
# LSTM with it (`mg.plan_memory(get_model("lstm").graph, inplace=True,
# planner="first-fit-start")`) and give its gap to the theoretical minimum in percent,
# `100 * (arena - minimum) / minimum`. Then compare with best-fit, which knows every life
# in advance.

# %%
def first_fit_by_start(buffers):
    """Exercise 1: return Placement.of(buffers, {buffer id: offset})."""
    return None    # your code here


answer_1 = None    # first_fit_by_start, once it is written
answer_2 = None    # the gap in percent, e.g. 12.5

# %%
check_answers({1: (answer_1, l06.exercise_1), 2: (answer_2, l06.exercise_2)})

# %% [markdown]
# ## Summary
#
# - Offset planning is 2D strip packing with fixed x: NP-hard, but real training graphs
#   are usually easy (the heuristics reach the theoretical minimum).
# - On adversarial instances the heuristics leave holes; the ILP finds the optimum when the
#   number of overlapping pairs is small, and reports its gap when it runs out of time.
# - Every planner has one signature, `planner(buffers, *, options) -> Placement`, so a new
#   idea is one function, checked by the same validator.
# - A planner that also chooses the order (MODeL's `model-ilp`) can beat every fixed
#   order, with a proof on small graphs; its cost grows so fast with the graph that it is
#   a tool for a few dozen nodes, or for subgraphs (ROAM).
# - Next: lesson 07 trades compute for memory: DTR evicts tensors and recomputes them,
#   and so can hold less than the working minimum (arena + workspace) that bounds every
#   plan that recomputes nothing.

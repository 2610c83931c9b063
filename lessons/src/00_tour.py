# %% [markdown]
# # 00 · A tour: where a training step's memory goes, and how to get it back
#
# **Goal.** In a few minutes: build a small training step, see its memory as a timeline and
# as a layout, then switch memory techniques on and off in a widget and watch the bytes move.
# The later lessons take each technique apart; this one shows the whole machine once.
#
# **Sources.** The flow follows the GE blog [Huawei GE] (GE's memory reuse: lifetimes, in-place, a
# `--dump-memory-layout`-style table) and the MXNet note [Chen 2016] (MXNet's memory design note:
# explicit backward graphs, sharing, in-place). Every number printed here is computed here.

# %%
import sys
from pathlib import Path

try:
    import minigraph as mg
except ModuleNotFoundError:          # a clone without `pip install -e .`: use the repo
    sys.path.insert(0, str(Path.cwd().parent))
    import minigraph as mg

from minigraph.graph import fmt_bytes as fmt
from minigraph.lessons import check_answers, l00
from minigraph.experiments.techniques import compare_techniques, same_counting
from minigraph.models import get_model
from minigraph.ops.registry import workspace_of
from minigraph.viz import memory_widget, plot_comparison, plot_layout, \
    plot_timeline

# %% [markdown]
# ## 1. A training step is one graph
#
# A three-layer MLP with a squared-error loss. `training_graph` adds the explicit backward
# nodes (the gradients are ordinary graph nodes) and one SGD update per parameter.

# %%
with mg.name_scope():
    x = mg.input("x", (64, 256))
    y = mg.input("y", (64, 10))
    W1 = mg.param("W1", (256, 512))
    W2 = mg.param("W2", (512, 512))
    W3 = mg.param("W3", (512, 10))
    h1 = mg.relu(x @ W1)
    h2 = mg.sigmoid(h1 @ W2)
    loss = ((h2 @ W3 - y) ** 2).mean()
    step = mg.training_graph(loss, [W1, W2, W3], lr=0.1)
print(step)

# %% [markdown]
# ## 2. Plan its memory
#
# `plan_memory` finds every tensor's life (first step that writes it, last step that reads
# it), lets outputs take over their inputs' bytes where that is safe (**in-place**), and
# packs the tensors into one arena (**sharing**, here MXNet's refcount simulation).
# The report compares three numbers: no reuse, this plan, and the **theoretical minimum**
# (the most bytes alive at any one step: no plan of this schedule can beat it).

# %%
report = mg.plan_memory(step, mg.MemoryOptions(inplace=True, planner="refcount"))
print(report.summary())
print()
print(report.table(limit=10))

# %% [markdown]
# ## 3. The pictures
#
# **Timeline**: the bytes alive at each step, stacked by kind. Activations (blue) pile up
# in the forward pass and are released in the backward pass, while gradients (orange)
# appear. The dotted line is what you would hold if nothing were ever freed; the red line
# is this plan's arena; the dashed line is the theoretical minimum.
# Below the red arena line is the arena (the planned tensors); above it, hatched, is what
# has buffers of its own (parameters, inputs, outputs) and each op's scratch workspace, so
# the top of the stack is everything the step holds at that moment.

# %%
plot_timeline(report, step)

# %% [markdown]
# **Layout**: every planned tensor as a rectangle, x = its life, y = its bytes in the arena.
# Rectangles at the same height at different times are bytes reused; hatched ones were
# written in place over their input (the arrow).

# %%
plot_layout(report)

# %% [markdown]
# **Every technique at once**: one bar per planner in `minigraph.memory.PLANNERS`
# (a planner added to the registry is one more bar), all with in-place on; each bar is
# the planner's arena (the planned tensors), as the axis says. Comparing
# techniques is an experiment (`minigraph/experiments/techniques.py`); the bars are drawn
# by `minigraph/viz/plots.py`. How the package is layered: `docs/ARCHITECTURE.md`.

# %%
rows = compare_techniques(step, mg.MemoryOptions(inplace=True), slow=False)
for row in rows:
    print(row)
at_minimum = [r.label for r in rows if r.bytes == r.theoretical_minimum]
print(f"\n{len(at_minimum)} of {len(rows)} rows reach the theoretical minimum:",
      ", ".join(at_minimum))
plot_comparison(rows)

# %% [markdown]
# On this MLP the best planners tie at the minimum (the cell counts them): a chain this
# short leaves little to choose between. A network whose tensors live long and overlap
# in many ways separates them. The zoo's U-Net keeps each encoder output alive
# until its decoder reads it back (long skip connections); the same comparison on its
# training step (`minigraph tour` starts on this model too):

# %%
unet_step = get_model("unet").graph
unet_rows = compare_techniques(unet_step, mg.MemoryOptions(inplace=True), slow=False)
for row in unet_rows:
    print(row)
sizes = sorted({r.bytes for r in unet_rows if r.family != "baseline"})
print(f"\n{len(sizes)} different arenas among the techniques that reuse memory")
plot_comparison(unet_rows)

# %% [markdown]
# ## 4. The widget
#
# `memory_widget` (also `mg.memory_widget`) puts a control on every switch: model and batch
# size (the zoo's models are in the list too), schedule order, in-place, planner,
# colours (parallel-safe sharing), alignment, and DTR with its budget. In-place has three
# settings: off, "last reader" (the op is its input's last reader, nnvm's rule) and
# "strict" (its only reader, the rule of MXNet's note and GE; lesson 03 compares them).
# Every change re-plans and redraws. The headline reads "arena: peak (no reuse) -> this
# plan, saved %, theoretical minimum": the **arena** holds the planned tensors. One view
# prints every byte count in one unit, the one its largest number needs (B, KiB = 2**10
# bytes, MiB = 2**20, GiB = 2**30), so the minimum reads the same in the headline and in
# every picture.

# %%
w = memory_widget(step, planner="refcount", inplace=True)
w

# %% [markdown]
# The controls can be moved from code too, by their names: `w.set(planner=...)`,
# `w.set(inplace="strict")`, `w.set(colors=2)` (tensors of different colours never share
# bytes, so two branches could run at once), `w.set(color_by="block")` (the layout's
# colours), `w.set(dtr=True)` (DTR at the smallest budget on the slider's 1% grid at which
# it finishes on this model), `w.set(dtr_budget=0.8)` (80% of the total peak: the run
# without rematerialisation, with the inputs, parameters and outputs). The widget above
# redraws each time.
#
# DTR (lesson 07) holds the planned tensors *and* the running op's scratch, its
# **workspace**, in one budget; a static plan keeps its workspace beside the arena. So
# with DTR on, the headline and the bars add a second count, **working memory** = arena +
# workspace, for every technique alike, against the **working minimum**: at each step
# the bytes alive plus that step's workspace, the largest such sum. No run of this
# schedule that recomputes nothing holds less. (Inputs, parameters and outputs are
# **outside**: the same for every technique. `docs/glossary.md` defines each word once.)

# %%
print("before:", w.headline)
w.set(planner="none", inplace=False)
print("no reuse:", w.headline)
w.set(planner="ge", inplace=True)
print("GE + in-place:", w.headline)
w.set(inplace="strict")
print("GE + strict in-place:", w.headline)
w.set(inplace=True, colors=2)
print("GE + in-place, 2 colours:", w.headline)
w.set(colors=1, dtr=True)
print("with DTR:", w.headline)
assert w.result.dtr.ok, "the default DTR budget is one at which DTR finishes"
slider = w.result.dtr                      # kept for the next section's comparison
slider_step = w.explorer.dtr_bounds(w.result.state).total // 100    # 1% of the total peak
slider_below = w.explorer.dtr_run(w.result.state, slider.ratio - 0.01)   # one step lower
w.set(dtr=False)

# %% [markdown]
# ### Static plans and DTR, counted the same way
#
# Does DTR beat the static plans on this MLP? In the one counting: the floors of this
# schedule, the best static plan (best-fit + in-place), and the smallest budget at which
# DTR finishes (tried on a grid from the smallest that could work up to the run without
# eviction). The last lines are written from these numbers. This grid is not the
# slider's, so its smallest budget need not be the widget's: the cell's last lines say
# why the two differ.

# %%
c = same_counting(step)
print(f"theoretical minimum {fmt(c.theoretical_minimum)} (arena), working minimum "
      f"{fmt(c.working_minimum)} (arena + workspace)")
print(f"best static plan: arena {fmt(c.static_arena)}, working memory "
      f"{fmt(c.static_working)} (its workspace beside the arena)")
print(f"DTR: smallest budget {fmt(c.dtr_budget)} of working memory, compute "
      f"x{c.dtr_overhead:.2f}")
gap = c.working_minimum - c.dtr_budget
if c.below:
    print(f"DTR goes below the working minimum, by {fmt(gap)} "
          f"({100 * gap / c.working_minimum:.1f}%), paying compute x{c.dtr_overhead:.2f}.")
else:
    print("DTR does not go below the working minimum here.")
print(f"It cannot go lower than {fmt(c.dtr_lower)}: the largest op must hold its inputs, "
      f"outputs and workspace at once: {100 * c.dtr_lower / c.working_minimum:.0f}% of the "
      f"working minimum" + (", so on this MLP almost nothing is left to evict."
                            if c.dtr_lower > 0.9 * c.working_minimum else "."))
ws, op = max((workspace_of(step, n), n.name) for n in step.nodes)
print(f"Every static plan keeps the largest workspace, {fmt(ws)} ({op}), beside its arena; "
      f"DTR places it among the tensors, so its budgets sit below the static plans' "
      f"working memory ({fmt(c.static_working)}) even where it recomputes little.")
assert c.dtr_budget < c.static_working and c.dtr_lower <= c.dtr_budget
print(f"Two grids, two smallest budgets. The widget's slider moves in steps of 1% of the "
      f"total peak ({fmt(slider_step)}); DTR finishes at {slider.ratio:.0%}, "
      f"{fmt(slider.budget)}, while the step below, {fmt(slider_below.budget)}, is "
      + ("under the lower bound, so it is not run." if slider_below.budget < c.dtr_lower
         else f"{slider_below.status}.")
      + f" The grid of this cell starts at the lower bound {fmt(c.dtr_lower)} itself and "
      f"tries 40 steps up, so it finds {fmt(c.dtr_budget)}: "
      + (f"a budget {fmt(slider.budget - c.dtr_budget)} below the slider's, "
         f"less than one slider step." if slider.budget - c.dtr_budget < slider_step
         else f"{fmt(slider.budget - c.dtr_budget)} below the slider's.")
      + f" Hence the widget's DTR is "
      f"{'below' if slider.budget < c.working_minimum else 'not below'} the working "
      f"minimum {fmt(c.working_minimum)} and this cell's is "
      f"{'below' if c.below else 'not below'} it.")

# %% [markdown]
# ## 5. A plan is only useful if it runs
#
# The executor allocates ONE arena of `report.arena_bytes` and makes every planned tensor
# (the activations and gradients) a view into it. The inputs, parameters and the loss have
# buffers of their own, outside the arena: the "unplanned" bytes printed below. (Lesson 08
# lists exactly what lives where.) The results must be identical to running with no reuse
# at all.

# %%
import numpy as np

rng = np.random.default_rng(0)
feeds = {"x": rng.standard_normal((64, 256)).astype("float32"),
         "y": rng.standard_normal((64, 10)).astype("float32"),
         **mg.init_params(step, seed=0)}
plain = mg.Executor(step, None, device="cpu").run(feeds)
ex = mg.Executor(step, report, device="cpu")
planned = ex.run(feeds)
same = all(np.array_equal(plain[k], planned[k]) for k in plain)
print("loss", float(planned[step.outputs[0]]), "| identical to no reuse:", same)
print("arena bytes:", ex.last_stats.arena_bytes, "| unplanned bytes:", ex.last_stats.unplanned_bytes)

# %% [markdown]
# ## Exercises
#
# **1.** The U-Net comparison above has in-place on. Switch it off: on `unet_step` with
# `mg.MemoryOptions(inplace=False, planner=NAME)` (alignment 512), which planners reach
# the theoretical minimum? Try the names in `mg.memory.PLANNERS` except the searching
# ones (`"ilp"`, `"anneal"`, `"search"`), and put all the names that reach it in
# `ANSWER_1` (a list or a set).
#
# **2.** Double the batch of the MLP of section 1 (64 -> 128) and rebuild the graph: by what
# factor does the theoretical minimum of refcount + in-place grow? Put it in `ANSWER_2`
# (a float, e.g. 1.5).

# %%
ANSWER_1 = None   # e.g. ["refcount", "ge"]
ANSWER_2 = None   # e.g. 1.5

# %%
check_answers({1: (ANSWER_1, l00.exercise_1), 2: (ANSWER_2, l00.exercise_2)})

# %% [markdown]
# ## Summary
#
# - A training step is one graph: forward, explicit backward and update nodes (lesson 01).
# - Each tensor lives from its producer's step to its last reader's step (lesson 02); the
#   largest sum alive at one step is the theoretical minimum of that schedule.
# - In-place, refcount sharing and colouring (lessons 03, 04), GE's block reuse and
#   schedule optimisation (05, 05b), offset planners and the ILP (06) approach that minimum;
#   lesson 08 runs the same plans on a GPU.
# - Every technique is counted the same way: the arena (planned tensors), the workspace
#   (an op's scratch), the bytes outside (inputs, parameters, outputs). DTR (07) holds
#   arena and workspace in one budget and can go below the working minimum, which no plan
#   that recomputes nothing can, by recomputing; how far depends on the model: on this MLP
#   the largest op alone nearly fills it (the cell above says by how much).
# - Every plan is validated and runs to identical results: the executor only sees offsets.

# %% [markdown]
# # 02 · Liveness: when is a tensor alive?
#
# **Goal.** Give every tensor of a graph its life under a schedule - the step that makes it
# and the last step that reads it - and from the lives alone compute the *theoretical
# minimum*: the fewest bytes any memory plan of that schedule can use.
#
# **Source.** The GE blog [Huawei GE], section 3 "lifetime analysis", with its CNN example of
# section 6. The blog's tables contain mistakes; we find them. The code is
# `minigraph/memory/liveness.py` (and `live_bytes_per_step` / `theoretical_minimum` in
# `minigraph/memory/buffers.py`); read it beside this lesson.

# %%
import sys
from pathlib import Path

try:
    import minigraph as mg
except ModuleNotFoundError:          # a clone without `pip install -e .`: use the repo
    sys.path.insert(0, str(Path.cwd().parent))
    import minigraph as mg

from math import prod

from matplotlib.figure import Figure

from minigraph import examples
from minigraph.examples import named
from minigraph.graph import fmt_bytes
from minigraph.lessons import check_answers, l02
from minigraph.memory import merge_inplace, theoretical_minimum, validate_offsets
from minigraph.memory.instances import blog_cnn_layout, cnn_block_buffers
from minigraph.memory.planners import plan_buffers
from minigraph.viz import plot_placement, plot_timeline

# %% [markdown]
# ## 1. The blog's four ops
#
# The GE blog [Huawei GE] runs Op1 -> Op2 -> Op3 -> Op4: Op1 makes T1, Op2 and Op3 both read T1 and
# make T2 and T3, Op4 reads T2 and T3. We build it with small tensors (4x4 float32, 64 bytes).

# %%
with mg.name_scope():
    x = mg.input("Input", (4, 4))
    t1 = named(mg.relu(x), "T1")           # Op1
    t2 = named(mg.tanh(t1), "T2")          # Op2
    t3 = named(mg.transpose(t1), "T3")     # Op3
    out = named(mg.add(t2, t3), "Output")  # Op4
    blog = mg.Graph([out], name="blog_cnn_liveness")
mg.draw(blog)

# %% [markdown]
# A *schedule* is a topological order of the nodes; step k runs the k-th node. A tensor
# lives from the step that makes it to the last step that reads it, **both ends
# inclusive**: while an op runs, its inputs and its outputs all occupy memory.
# Inputs, parameters and requested outputs are never reused (GE treats Variables and
# Consts the same way): they live for the whole run and are not *planned*.

# %%
live = mg.liveness(blog, alignment=1)
print(live.table())

# %% [markdown]
# The blog's table says T1 [1,2], T2 [2,3], T3 [3,3] (its steps count from 1) and
# concludes that "T1 and T3 do not overlap, so they can share a memory pool". But Op3
# *reads* T1 while it *writes* T3: at Op3's step both exist. The blog's end steps are
# one short (it records the step before the last reader). With inclusive ends they
# overlap, and the one validator every plan must pass says so:

# %%
b = {buf.id: buf for buf in live.buffers()}
print("T1:", b["T1"], "\nT3:", b["T3"])
print("alive at the same step:", b["T1"].overlaps_in_time(b["T3"]))
try:
    validate_offsets([b["T1"], b["T3"]], {"T1": 0, "T3": 0})   # the blog's sharing
except mg.PlanError as e:
    print("PlanError:", e)

# %% [markdown]
# Here Op3 is a transpose: writing T3 over T1 would overwrite elements of T1 it has not
# read yet. (An elementwise op that reads element i before writing element i, and is
# T1's last reader, may write over T1: that is *in-place*, a rule of its own, lesson 03.
# Liveness alone never lets two live tensors share.)
#
# ## 2. Bytes alive per step, and the theoretical minimum
#
# Add up the bytes of the planned tensors alive at each step. The largest sum is the
# theoretical minimum: at that step those tensors all exist at once, so no plan of this
# schedule fits in fewer bytes.

# %%
per_step = live.live_bytes()
for step, (node, nbytes) in enumerate(zip(live.schedule, per_step)):
    print(f"step {step}: {node:7} {nbytes:4d} B alive")
print("no reuse:", live.no_reuse_bytes(), "B   theoretical minimum:",
      live.theoretical_minimum(), "B")

# %% [markdown]
# ## 3. The blog's CNN block
#
# [Huawei GE, blog §6]: Input -> Conv -> ReLU -> Pool, with an input of 3x224x224, conv and
# ReLU outputs of 64x112x112 and a pool output of 64x56x56. The blog adds up what each step
# allocates, then plans the block with ReLU in place and the pool output "reusing T1", and
# reports a peak that falls from 7.35 MB to 3.35 MB. We build the block in float32, redo the
# blog's sums, and then check its layout.

# %%
cnn = examples.cnn_block()
cnn_live = mg.liveness(cnn, alignment=1)
print(cnn_live.table())
mg.draw(cnn)

# %% [markdown]
# **The blog's arithmetic.** Its "MB" and "KB" are powers of ten (10^6 and 10^3 bytes);
# minigraph prints KiB and MiB, powers of two (2^10 and 2^20 bytes: one MiB is about 1.05
# MB). The blog's conv figure is float32 bytes, but its input figure is the *number of
# elements*. Its two tables, redone from the shapes:

# %%
MB = 10**6                                  # the blog's unit
print(f"1 MiB = {2**20} B = {2**20 / MB:.2f} MB;  1 KiB = {2**10} B = {2**10 / 1000:.3f} KB")
TENSORS = ("input_0", "conv1_out", "relu1_out", "pool1_out")
elements = {n: prod(cnn.tensors[n].shape) for n in TENSORS}
nbytes = {n: cnn_live.intervals[n].bytes for n in TENSORS}
blog_mb = {"input_0": round(elements["input_0"] / MB, 2),       # elements, not bytes
           **{n: round(nbytes[n] / MB, 1) for n in TENSORS[1:]}}
print(f"input_0: {elements['input_0']} elements -> the blog's "
      f"{blog_mb['input_0'] * 1000:.0f} KB; in float32 it is {nbytes['input_0']} B")
# with its reuse the blog allocates nothing for ReLU (in place) and the pool ("reuses T1")
blog_reuse = {**blog_mb, "relu1_out": 0.0, "pool1_out": 0.0}
peak = reused = 0.0
print("             the blog without reuse         the blog with its reuse")
for n in TENSORS:
    peak += blog_mb[n]
    reused += blog_reuse[n]
    print(f"  {n:10} + {blog_mb[n]:4.2f} MB, peak {peak:4.2f} MB"
          f"    + {blog_reuse[n]:4.2f} MB, peak {reused:4.2f} MB")
print(f"the blog: {peak:.2f} MB -> {reused:.2f} MB, saved {100 * (1 - reused / peak):.0f}%")

# %% [markdown]
# **The right figures.** In float32 every tensor is four bytes an element. Without any
# reuse the four tensors take (the 3x3 conv weights come on top, and the blog leaves them
# out):

# %%
no_reuse = sum(nbytes.values())
for n in TENSORS:
    print(f"{n:10} {elements[n]:8d} elements  {nbytes[n]:8d} B = {fmt_bytes(nbytes[n]):>10}"
          f"  (the blog's unit: {nbytes[n] / MB:.2f} MB)")
print(f"no reuse: {no_reuse} B = {fmt_bytes(no_reuse)} (= {no_reuse / MB:.2f} MB);"
      f" weights {fmt_bytes(cnn_live.intervals['conv1_w'].bytes)} more")

# %% [markdown]
# **The blog's layout.** ReLU in place over the conv output is right: ReLU is elementwise
# and conv1_out's only reader (lesson 03). But the pool output cannot go on those bytes:
# the pooling op *reads* relu1_out while it *writes* pool1_out, so at the pooling step both
# are alive. `blog_cnn_layout` puts the three activations at offset 0, as the blog does,
# with the ReLU hand-over declared. The validator every plan must pass refuses it:

# %%
buffers, offsets, handovers = blog_cnn_layout(cnn)
try:
    validate_offsets(buffers, offsets, handovers=handovers)
    print("accepted")
except mg.PlanError as e:
    print("PlanError:", e)

# %% [markdown]
# **A right plan** keeps ReLU in place and gives the pool output bytes of its own. How
# much is alive at the peak then depends on the input. minigraph holds a graph input for
# the whole run (what the caller fed is not the planner's to overwrite); a runtime that
# frees the input once its only reader, the conv, has run needs less. `cnn_block_buffers`
# gives each tensor its real life either way; we fuse the in-place pair into one buffer
# (`merge_inplace`, lesson 03; the rectangle named conv1_out holds relu1_out too), plan,
# and validate tensor by tensor:

# %%
fig = Figure(figsize=(12, 3.4), layout="constrained")
axes = fig.subplots(1, 2)
peaks = {}
for ax, held in zip(axes, (True, False)):
    bufs, pairs = cnn_block_buffers(cnn, hold_input=held)
    merged, group = merge_inplace(bufs, pairs)          # relu1_out on conv1_out's bytes
    _, placement = plan_buffers(merged, "refcount", alignment=1)
    tensor_offsets = {t: placement.offsets[b] for t, b in group.items()}
    validate_offsets(bufs, tensor_offsets, handovers=pairs)     # raises if unsafe
    peaks[held] = placement.arena_bytes
    assert peaks[held] == theoretical_minimum(merged)           # nothing wasted
    label = "input held" if held else "input freed after the conv"
    print(f"{label:28}: peak {peaks[held]} B = {fmt_bytes(peaks[held])} "
          f"(= {peaks[held] / MB:.2f} MB), saved {100 * (1 - peaks[held] / no_reuse):.0f}%"
          f" of {fmt_bytes(no_reuse)}")
    plot_placement(merged, placement, ax=ax, legend=not held,
                   title=f"{label}: {fmt_bytes(peaks[held])}")
fig

# %% [markdown]
# So the block needs the printed peaks, not the blog's figure: its figure is low because it
# counts the input in elements and because it puts the pool output on bytes the pooling op
# is still reading. The blog's table without reuse is off for the same first reason.
#
# minigraph's own plan of the block (`plan_memory`, which plans only the activations:
# the input and the pool output, a graph input and a graph output, keep their own
# buffers) gives the same answer as the "input held" line: without in-place nothing can
# be saved, since conv1_out and relu1_out are both alive at the ReLU step; with in-place the
# arena is one buffer.

# %%
for inplace in (False, True):
    report = mg.plan_memory(cnn, mg.MemoryOptions(planner="refcount", alignment=1,
                                                  inplace=inplace))
    print(report.summary())
own = report.unplanned["input"] + report.unplanned["output"]
print(f"arena {fmt_bytes(report.arena_bytes)} + input and output {fmt_bytes(own)} = "
      f"{fmt_bytes(report.arena_bytes + own)}; the same as 'input held': "
      f"{report.arena_bytes + own == peaks[True]}")
plot_timeline(report, cnn)

# %% [markdown]
# ## 4. A training graph: activations wait for the backward pass
#
# The MXNet note's two-layer perceptron [Chen 2016], forward + explicit backward + update.
# Forward activations that a gradient rule reads (act1 for `relu_grad`) stay alive until
# the backward pass reaches them: long lives. Long is not large, though. Which tensors
# are alive at the busiest step, and how much of the minimum each holds? The last line is
# written from the numbers.

# %%
mlp, names = examples.two_layer_mlp()
mlp_live = mg.liveness(mlp, alignment=1)
for note_name, t in names.items():        # the MXNet note's names for the tensors
    iv = mlp_live.intervals[t]
    print(f"{note_name:8} steps {iv.start:2d}..{iv.end:2d}  {iv.bytes:7d} B")
minimum = mlp_live.theoretical_minimum()
print("theoretical minimum:", minimum, "B of", mlp_live.no_reuse_bytes(), "B")
busiest = mlp_live.live_bytes().index(minimum)
note_name = {t: n for n, t in names.items()}
alive = sorted((iv for iv in mlp_live.planned() if iv.start <= busiest <= iv.end),
               key=lambda iv: -iv.bytes)
print(f"alive at step {busiest} ({mlp_live.schedule[busiest]}):",
      ", ".join(f"{note_name.get(iv.name, iv.name)} {iv.bytes} B ({iv.kind}, "
                f"{100 * iv.bytes / minimum:.0f}%)" for iv in alive))
top = alive[0]
print(f"the largest is {note_name.get(top.name, top.name)}, a {top.kind} of shape "
      f"{mlp.tensors[top.name].shape}: {100 * top.bytes / minimum:.0f}% of the minimum; "
      f"act1, the activation that waits for the backward pass, shape "
      f"{mlp.tensors['act1'].shape}, is {mlp_live.intervals['act1'].bytes} B")
assert top.kind == "gradient" and top.bytes > 0.5 * minimum
plot_timeline(mg.plan_memory(mlp, mg.MemoryOptions(planner="refcount", alignment=1)), mlp)

# %% [markdown]
# On this small perceptron the weight gradient d(W1) dominates the peak (its shape is
# the first layer's weights, printed above), because the input layer is wide and the
# batch small; the activations waiting for the backward pass are a sliver. Grow the batch
# and the activations grow with it while d(W1) does not (lesson 00's exercise 2 measures
# that on another MLP).

# %% [markdown]
# ## 5. The schedule decides the lives
#
# Liveness is a function of (graph, schedule). Run Op3 before Op2 in the blog's graph:
# every order that respects the edges is a valid schedule, and the lives change.

# %%
other = ["T1", "T3", "T2", "Output"]
other_live = mg.liveness(blog, other, alignment=1)
for name in ("T1", "T3"):                  # T2's new life: exercise 1
    before, after = live.intervals[name], other_live.intervals[name]
    print(f"{name}: steps {before.start}..{before.end} -> {after.start}..{after.end}")
try:
    mg.liveness(blog, ["T2", "T1", "T3", "Output"])        # T2 before its input T1
except mg.GraphError as e:
    print("GraphError:", e)

# %% [markdown]
# ## Exercises
#
# **1.** In the blog's graph with the schedule `["T1", "T3", "T2", "Output"]`, what is
# T2's life? Put `(start, end)` in `ANSWER_1` (work it out first, then print the table).
#
# **2.** Without in-place, what is the theoretical minimum (alignment 1) of the sigmoid
# chain `examples.sigmoid_chain(5, shape=(4, 8))`? Each sigmoid output is 128 bytes. Put
# the number of bytes in `ANSWER_2`.
#
# **3.** In the two-layer perceptron (`mlp` above), the theoretical minimum is the bytes
# alive at one step. Which node runs at that step? Put its name (an entry of
# `mlp_live.schedule`) in `ANSWER_3`, and say to yourself which tensors are alive there.
#
# **4.** Write liveness yourself. `my_intervals(graph, schedule)` returns
# `{tensor name: (start, end)}` for every *planned* tensor of `graph` under `schedule` (a
# list of node names): the rules of section 1, nothing else. Use `graph.tensors` (each
# has `.kind` and `.producer`), `graph.consumers[name]` (the nodes that read a tensor)
# and `graph.outputs`. Set `ANSWER_4 = my_intervals`; the check compares it with
# `mg.liveness` on six graphs and schedules.

# %%
ANSWER_1 = None   # (start, end)
ANSWER_2 = None   # bytes
ANSWER_3 = None   # a node name


def my_intervals(graph, schedule):
    """{tensor name: (start, end)} for the planned tensors."""
    raise NotImplementedError      # replace this line: a few lines do it


ANSWER_4 = None   # then: ANSWER_4 = my_intervals

# %%
check_answers({1: (ANSWER_1, l02.exercise_1), 2: (ANSWER_2, l02.exercise_2),
               3: (ANSWER_3, l02.exercise_3), 4: (ANSWER_4, l02.exercise_4)})

# %% [markdown]
# ## Summary
#
# - A tensor lives from the step that makes it to the last step that reads it, both
#   ends inclusive; inputs, parameters and outputs are not planned.
# - Two tensors may share bytes only if their lives are disjoint (in-place, lesson 03, is
#   the one exception, with rules of its own). The blog's "T1 and T3 share" and "Pool
#   reuses T1" both break this: an op reads its input while it writes its output.
# - The blog's CNN block: its "150KB" input counts elements, and its pool output sits on
#   bytes the pooling op is still reading, which the validator refuses. Planned right, in
#   float32, the block needs the peaks printed in section 3, with or without the input held.
# - The theoretical minimum is the largest number of bytes alive at one step; it belongs
#   to a schedule, and another schedule can lower it.
# - Next: lesson 03 - in-place and MXNet's refcount simulation.

# %% [markdown]
# # 02 · Liveness: when is a tensor alive?
#
# **Goal.** Give every tensor of a graph its life under a schedule - the step that makes it
# and the last step that reads it - and from the lives alone compute the *theoretical
# minimum*: the fewest bytes any memory plan of that schedule can use.
#
# **Source.** The GE blog [Huawei GE], section 3 "lifetime analysis", with its CNN example of
# section 6. The blog's tables contain two mistakes; we find both. The code is
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

from minigraph import examples
from minigraph.examples import named
from minigraph.lessons import check_answers
from minigraph.memory import validate_offsets
from minigraph.viz import plot_timeline

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
# [Huawei GE, blog §6]: Input -> Conv -> ReLU -> Pool with an input of 3x224x224, conv and
# ReLU outputs of 64x112x112 and a pool output of 64x56x56. In float32 those are:

# %%
cnn = examples.cnn_block()
cnn_live = mg.liveness(cnn, alignment=1)
print(cnn_live.table())
mg.draw(cnn)

# %% [markdown]
# The blog writes "Input: 3x224x224 = 150KB": that counts *elements* (150,528), not bytes;
# in float32 the input is 602,112 B. Its other figures (3.2 MB, 0.8 MB) are float32 bytes.
#
# The planned tensors are conv1_out and relu1_out (pool1_out is the graph output). At
# step 1 ReLU reads conv1_out and writes relu1_out: both alive, so without in-place the
# minimum is both of them.

# %%
report = mg.plan_memory(cnn, mg.MemoryOptions(planner="refcount", alignment=1))
print(report.summary())
plot_timeline(report, cnn)

# %% [markdown]
# ## 4. A training graph: activations wait for the backward pass
#
# The MXNet note's two-layer perceptron [Chen 2016], forward + explicit backward + update. Forward
# activations that a gradient rule reads (act1 for `relu_grad`) stay alive until the
# backward pass reaches them: that is where training memory goes.

# %%
mlp, names = examples.two_layer_mlp()
mlp_live = mg.liveness(mlp, alignment=1)
for seed_name, t in names.items():
    iv = mlp_live.intervals[t]
    print(f"{seed_name:8} = {t:30} steps {iv.start:2d}..{iv.end:2d}  {iv.bytes:7d} B")
print("theoretical minimum:", mlp_live.theoretical_minimum(), "B of",
      mlp_live.no_reuse_bytes(), "B")
plot_timeline(mg.plan_memory(mlp, mg.MemoryOptions(planner="refcount", alignment=1)), mlp)

# %% [markdown]
# ## 5. The schedule decides the lives
#
# Liveness is a function of (graph, schedule). Run Op3 before Op2 in the blog's graph:
# every order that respects the edges is a valid schedule, and the lives change.

# %%
other = ["T1", "T3", "T2", "Output"]
print(mg.liveness(blog, other, alignment=1).table())
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
# **3.** In the two-layer perceptron (`mlp` above), which *forward* activation lives the
# most steps? Put its tensor name in `ANSWER_3`.

# %%
ANSWER_1 = None   # (start, end)
ANSWER_2 = None   # bytes
ANSWER_3 = None   # a tensor name

# %%
def check_1(answer):
    iv = mg.liveness(blog, ["T1", "T3", "T2", "Output"]).intervals["T2"]
    right = (iv.start, iv.end)
    return tuple(answer) == right, f"T2 lives {right}"


def check_2(answer):
    right = mg.liveness(examples.sigmoid_chain(5, shape=(4, 8)), alignment=1)\
        .theoretical_minimum()
    return answer == right, (f"minimum {right} B: at every step a sigmoid reads one output "
                             "and writes the next")


def check_3(answer):
    acts = [iv for iv in mlp_live.intervals.values() if iv.kind == "activation"]
    longest = max(iv.end - iv.start for iv in acts)
    winners = [iv.name for iv in acts if iv.end - iv.start == longest]
    return answer in winners, f"{', '.join(winners)}: {longest} steps"


check_answers({1: (ANSWER_1, check_1), 2: (ANSWER_2, check_2), 3: (ANSWER_3, check_3)})

# %% [markdown]
# ## Summary
#
# - A tensor lives from the step that makes it to the last step that reads it, both
#   ends inclusive; inputs, parameters and outputs are not planned.
# - Two tensors may share bytes only if their lives are disjoint (in-place, lesson 03, is
#   the one exception, with rules of its own). The blog's "T1 and T3 share" and "Pool
#   reuses T1" both break this: an op reads its input while it writes its output.
# - The theoretical minimum is the largest number of bytes alive at one step; it belongs
#   to a schedule, and another schedule can lower it.
# - Next: lesson 03 - in-place and MXNet's refcount simulation.

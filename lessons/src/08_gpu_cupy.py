# %% [markdown]
# # 08 · The same plans on a GPU, with CuPy
#
# **Goal.** Run a planned training step on a GPU: one device arena holding the planned
# tensors (activations and gradients), each a view at its planned offset, and the same
# kernels as on NumPy. Compare results with the CPU, measure the device memory the run
# really used against the plan, and meet the rule the GPU makes loud: offsets must be
# aligned for the dtype.
#
# **No GPU here?** Then every cell still runs, on NumPy, and says so: the code is the same,
# only `device` changes. To run it on a GPU: `pip install 'minigraph[gpu]'` on a machine
# with an NVIDIA GPU and CUDA 13 (`minigraph[gpu12]` for CUDA 12: either CuPy wheel gives
# the `cupy` module minigraph uses).
#
# **Sources.** [Huawei GE] (GE's static memory reuse on the device: one pool, offsets, 512-byte
# alignment) and [Chen 2016] (MXNet's static allocation: plan once, then every step reuses the
# same bytes). The code: `minigraph/backend.py` (NumPy or CuPy),
# `minigraph/runtime/executor.py` (the arena) and `minigraph/runtime/kernels.py` (the one
# place a kernel runs, shared by the executor, DTR and the pool measurement). The few
# kernels that a GPU runs its own way (one cuBLAS call for a batched product, one kernel
# for im2col or GELU) are in `minigraph/ops/cuda.py`, and those that reduce (softmax,
# layer and batch norm, `sum_to`: a row per warp, column sums in two stages) in
# `minigraph/ops/cuda_rows.py`, each beside its NumPy twin's name.

# %%
import sys
import time
from pathlib import Path

try:
    import minigraph as mg
except ModuleNotFoundError:          # a clone without `pip install -e .`: use the repo
    sys.path.insert(0, str(Path.cwd().parent))
    import minigraph as mg

import inspect

import numpy as np

from minigraph.backend import resolve_device
from minigraph.lessons import check_answers, l08
from minigraph.memory.plan import offset_alignment
from minigraph.models import get_model

# %% [markdown]
# ## 1. Which device?
#
# `device="auto"` means the GPU when CuPy is installed and sees a CUDA device, else NumPy.
# (The environment variable `MINIGRAPH_DEVICE=cpu` forces NumPy.)

# %%
DEVICE = resolve_device("auto")
if DEVICE == "gpu":
    import cupy
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    print("running on the GPU:", props["name"].decode(), "with CuPy", cupy.__version__)
else:
    print("no GPU visible to CuPy here (or MINIGRAPH_DEVICE=cpu): this lesson runs on "
          "NumPy; every cell is the same code a GPU would run")

# %% [markdown]
# ## 2. One kernel, two array modules
#
# A kernel gets `ctx.xp` (NumPy or CuPy) and writes into the output buffers it is given.
# That is why the same plan runs on both: the executor hands it views into the arena.

# %%
print(inspect.getsource(mg.ops.get_op("sigmoid").forward))

# %% [markdown]
# ## 3. Plan once, run on the device
#
# A small CNN training step from the zoo, planned with GE's two-level reuse and in-place.
# The executor allocates ONE device array of `arena_bytes` and views every *planned* tensor
# at its offset. Not every tensor is planned; section 4 lists what lives where.

# %%
model = get_model("cnn", batch=8)
step = model.graph
report = mg.plan_memory(step, mg.MemoryOptions(inplace=True, planner="ge"))
print(report.summary())
feeds = model.feeds(seed=0)

ex_dev = mg.Executor(step, report, device=DEVICE)
out_dev = ex_dev.run(feeds, measure=True)
ex_ref = mg.Executor(step, None, device="cpu")     # NumPy, no reuse: the reference
out_ref = ex_ref.run(feeds)
worst = max(float(np.max(np.abs(out_dev[k] - out_ref[k]))) for k in out_ref)
print(f"device {DEVICE}: loss {float(out_dev[model.loss]):.6f}, reference "
      f"{float(out_ref[model.loss]):.6f}; largest difference over all outputs {worst:.2e}")

# %% [markdown]
# On NumPy the planned run is bit-identical to the reference; on a GPU, kernels may sum in
# another order (cuBLAS), so expect differences around 1e-6 in float32, not more.
#
# ## 4. What lives in the arena, and what does not
#
# The arena holds exactly the planned tensors: the activations and gradients that are not
# graph outputs. Every other tensor has its own buffer, allocated once per run beside the
# arena: the inputs and parameters (the executor's copies of the feeds), the constants,
# and the graph outputs (the loss). A parameter's SGD update (kind `updated`) is written
# over the parameter itself, so it takes no bytes of its own. The cell counts both sides
# and checks that the executor's "unplanned" bytes are exactly the buffers outside it.

# %%
def where(graph, plan):
    """Tensors by kind: those with an offset in the arena, and those with their own buffer."""
    inside, outside = {}, {}
    for t in graph.tensors.values():
        if t.name in plan.offsets:
            side, kind = inside, t.kind
        else:
            side = outside
            kind = ("output" if t.name in graph.outputs and t.alias_of is None else t.kind)
        n, b = side.get(kind, (0, 0))
        side[kind] = (n + 1, b + (0 if t.alias_of else t.nbytes))
    return inside, outside


inside, outside = where(step, report.plan)
print(f"{'':24}{'tensors':>8}{'bytes':>12}")
for label, side in (("in the arena", inside), ("in buffers of their own", outside)):
    print(label)
    for kind, (n, b) in side.items():
        print(f"  {kind:22}{n:>8}{b:>12,}")
stats = ex_dev.last_stats
own = sum(b for k, (n, b) in outside.items() if k != "const")
assert stats.unplanned_bytes == own, (stats.unplanned_bytes, own)
assert set(inside) <= {"activation", "gradient"}
print(f"the {sum(b for _, b in inside.values()):,} B of planned tensors share an arena of "
      f"{stats.arena_bytes:,} B; the run's unplanned bytes, {stats.unplanned_bytes:,} B, are "
      f"the inputs, parameters and outputs above (the constants, loaded once when the "
      f"executor is made, are not counted)")

# %% [markdown]
# Op **workspace** (the im2col columns of a convolution, say) is in neither: a kernel
# allocates it while it runs and frees it when it returns. So a run holds at most
# `arena + unplanned + the largest workspace` (`stats.expected_peak`) at one time.
#
# ## 5. What the run really used
#
# `last_stats` says what the plan expected (arena + unplanned + largest workspace) and what
# was measured: on a GPU, a memory hook on CuPy's pool that sees every allocation and
# release, read after each op; on NumPy, `tracemalloc`'s peak. (NumPy makes small hidden
# temporaries of its own inside some calls, so there the measured peak is a little above
# the expected one; `stats.undeclared` names the ops.)

# %%
def show(stats, label):
    measured = "-" if stats.measured_peak is None else f"{stats.measured_peak:,} B"
    print(f"{label:18} arena {stats.arena_bytes:>9,} B  unplanned {stats.unplanned_bytes:>9,} B"
          f"  workspace {stats.workspace_bytes:>8,} B  expected peak {stats.expected_peak:>9,} B"
          f"  measured peak {measured}")


show(ex_dev.last_stats, f"planned ({DEVICE})")
ex_none = mg.Executor(step, mg.plan_memory(step), device=DEVICE)   # the "none" plan
ex_none.run(feeds, measure=True)
show(ex_none.last_stats, f"no reuse ({DEVICE})")

# %% [markdown]
# ## 6. Time per step
#
# A few steps on each device (the first run on a GPU includes CUDA's start-up; we skip it).
# On a model this small the GPU may well be slower than NumPy: launching kernels costs
# more than the arithmetic. The numbers below are measured, not promised.

# %%
def time_steps(ex, n=5):
    ex.run(feeds)                      # warm-up
    t0 = time.perf_counter()
    for k in range(n):
        ex.run(feeds, step=k)
    return (time.perf_counter() - t0) / n


print(f"{DEVICE}: {time_steps(ex_dev) * 1000:.1f} ms per step (planned arena)")
if DEVICE == "gpu":
    print(f"cpu: {time_steps(mg.Executor(step, report, device='cpu')) * 1000:.1f} ms per step")

# %% [markdown]
# ## 7. On a real GPU, at real sizes, against PyTorch
#
# `minigraph/experiments/gpu.py` runs one SGD step of three zoo models (an MLP, ResNet-18
# at CIFAR size, a GPT-style decoder) once per technique and once in PyTorch eager (the
# same graph, op by op, with PyTorch's own kernels and caching allocator [PyTorch CUDA]).
# It times each step with CUDA events and measures the device memory each one really
# used: minigraph's with the memory hook of section 5, PyTorch's with
# `torch.cuda.max_memory_allocated()`. The last table runs DTR (lesson 07) on the GPU under
# a budget below what the step needs without rematerialisation.
#
# On a GPU this cell measures small versions of the three models live (well under a
# minute). Without one it shows the rows of the last run on a real GPU, committed with the
# code (`benchmarks/gpu_run.sh` made them), and names the device that gave them.

# %%
from minigraph.experiments import gpu as gpu_bench
from minigraph.graph import fmt_bytes

if DEVICE == "gpu":
    results = gpu_bench.run("gpu", gpu_bench.LESSON_SIZES, repeats=5, warmup=2,
                            progress=False)
    print("measured now, on this GPU, at the lesson's small sizes")
else:
    results = gpu_bench.committed()
    if results is not None:
        env = results["environment"]
        print(f"no GPU here: the last run on a real GPU ({env['device']}, CuPy "
              f"{env.get('cupy')}, CUDA {env.get('cuda_runtime')}, PyTorch "
              f"{env.get('torch')}), committed in {gpu_bench.COMMITTED.name}")
if results is not None:
    print(gpu_bench.tables(results))
    print("\n".join(gpu_bench.targets(results)))
    rows = [r for row in results["models"].values() for r in row["techniques"].values()]
    pooled = [r for r in rows if r["pool"] and r["measured"]]
    larger = [r for r in pooled if r["pool"] > r["measured"]]
    agree = sum(abs(r["measured"] - r["declared"]) <= 0.01 * r["declared"] for r in rows)
    print(f"declared and measured peak within 1%: {agree} of {len(rows)} rows; pool reserved "
          f"above the measured peak: {len(larger)} of {len(pooled)} rows"
          + (f" (by at most {fmt_bytes(max(r['pool'] - r['measured'] for r in larger))})"
             if larger else ", equal on every one"))
    splits = {name: gpu_bench.peak_split(row) for name, row in results["models"].items()}
    if not any(splits.values()):
        print("PyTorch as a user writes it (eager, fused update): not in this run; "
              "benchmarks/gpu_run.sh measures it on the next GPU")
else:
    print("no GPU here, and no committed GPU run to show")

# %% [markdown]
# Read the tables column by column. *declared* is what the plan says the step holds at its
# fullest; *measured* is what the hook saw: where the two agree (the last line counts the rows
# within 1%), the plan is what the device really ran. *pool reserved* is the same arrays as
# CuPy's pool holds them, each rounded up to a block of 512 bytes, so it is never below the
# measured peak, and above it only by that rounding, where an array's size is not a multiple
# of 512 bytes: a few bytes an array, which at these sizes the table's two columns round to
# the same number. The last line counts the rows where pool reserved is above the measured
# peak and gives the largest difference.

# %% [markdown]
# Against PyTorch, two baselines. The *replay* runs minigraph's own graph op by op in PyTorch
# (batch norm as six ops, attention as a masked softmax): the same arithmetic, useful for
# checking numbers, but not what anyone would run. *PyTorch as a user writes it*
# (`minigraph/experiments/torch_idiomatic.py`: `nn.BatchNorm2d`, scaled dot-product
# attention, cuDNN's benchmark mode) is the fair one, in two schedules. Plain eager holds
# every gradient until `optimizer.step()`; with the update fused into the backward pass
# (a hook per parameter applies SGD and frees the gradient at once), PyTorch has the
# schedule minigraph's graph has. So the peak gap splits in two, and the last lines of the
# table print both parts: *the schedule* (eager minus fused update: what any framework saves
# by updating early) and *the plan* (fused update minus minigraph: what knowing the whole
# step before it runs saves - PyTorch's caching allocator frees each activation when autograd
# is done with it, but cannot give its bytes to a tensor it does not know about yet). A
# committed run older than these rows says so instead.

# %% [markdown]
# ## 8. Aligned offsets, on every device
#
# A float32 view must start at a multiple of 4 bytes, a float64 view at a multiple of 8.
# CuPy refuses a misaligned view; NumPy accepts one but runs other loops on it, whose
# sums can differ from the aligned run's in the last bits: a silent wrong answer. So the
# validator refuses such a plan on every device (`MemoryPlan.check_itemsizes`, naming the
# tensor), and `plan_memory` places every offset at a multiple of each planned tensor's
# itemsize, whatever the alignment asked (`offset_alignment`). A planner sees only
# buffers, which carry no dtype: with `alignment=1` it packs bytes tightly and, where
# dtypes are mixed, it can produce such offsets. A graph with a float32 and a float64
# branch, its buffers planned by refcount at alignment 1 (both built in
# `minigraph/lessons/l08.py`, so that the exercise checks below use the same graph):

# %%
print(inspect.getsource(l08.mixed_graph))
mixed = l08.mixed_graph()
misaligned = l08.misaligned
print(inspect.getsource(misaligned))


tight = l08.tight_plan(1)          # refcount on the buffers alone, at alignment 1
print(tight.table())
print("misaligned:", misaligned(tight, mixed))
try:
    mg.Executor(mixed, tight, device=DEVICE)
except mg.PlanError as e:
    print("PlanError:", e)
planned = mg.plan_memory(mixed, mg.MemoryOptions(planner="refcount", alignment=1))
print(f"plan_memory at alignment 1 places offsets at multiples of "
      f"{offset_alignment(mixed, 1)} bytes; misaligned:", misaligned(planned, mixed))

# %% [markdown]
# ## Exercises
#
# **1.** Find the smallest alignment in (1, 2, 4, 8, 16, 64, 512) for which refcount,
# planning the buffers alone (`l08.tight_plan(alignment)`), gives no misaligned tensor on
# `mixed` (use `misaligned`). Put it in `ANSWER_1`.
#
# **2.** On the CNN `step` with `bestfit` + in-place, how many bytes larger is the arena at
# GE's alignment of 512 than at 8? Put the difference in `ANSWER_2`.

# %%
ANSWER_1 = None
ANSWER_2 = None

# %%
check_answers({1: (ANSWER_1, l08.exercise_1), 2: (ANSWER_2, l08.exercise_2)})

# %% [markdown]
# ## Summary
#
# - The backend picks NumPy or CuPy once; kernels are written against `xp` and write
#   into the buffers they are given, so one plan runs on both.
# - On the device the arena is one allocation holding the planned tensors (activations and
#   gradients), each a view; inputs, parameters, constants and outputs have buffers of
#   their own, and each op's workspace comes and goes while it runs.
# - The measured peak (CuPy's pool, or tracemalloc) is the check that the plan is real.
# - Every device needs offsets aligned for the dtype (CuPy refuses a misaligned view,
#   NumPy computes other bits on one): the validator checks it and `plan_memory` keeps it;
#   GE's 512 bytes satisfies it always.

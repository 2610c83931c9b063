# %% [markdown]
# # 09 · Online allocators and fragmentation
#
# **Goal.** A static planner sees every tensor's whole life before it places anything. A
# framework's allocator does not: it gets `alloc` and `free` calls one at a time and must
# answer each at once. Here we replay the same training step through the allocators that
# real frameworks use - first fit, best fit, PyTorch's caching allocator, GMLake's virtual
# memory stitching - draw the holes they leave, and compare them with a static plan and the
# theoretical minimum.
#
# **Sources.** MODeL's [Steiner 2023] and ROAM's [Shu 2023] pictures of a hole
# too small to use, Coop's description of first fit with coalescing [Zhang 2023], DSA-SA's
# [Imanishi 2024] notes on PyTorch's caching allocator (512-byte rounding, small and large pools,
# split blocks, `max_split_size`, power-of-two rounding, `cudaFree` only when memory runs out), and
# GMLake's stitching of non-contiguous physical chunks [Guo 2024]. The code is
# `minigraph/memory/online/` (read `trace.py`, `base.py`, then one allocator per file);
# the comparison with the static planners is `minigraph/experiments/allocators.py`, and
# the pictures are drawn by `minigraph/viz/allocators.py`.

# %%
import random
import sys
from pathlib import Path

try:
    import minigraph as mg
except ModuleNotFoundError:          # a clone without `pip install -e .`: use the repo
    sys.path.insert(0, str(Path.cwd().parent))
    import minigraph as mg

import matplotlib.pyplot as plt

from minigraph.examples import wide_mlp
from minigraph.experiments.allocators import (
    compare_allocators, dtr_runs, format_rows, static_plan,
)
from minigraph.memory.online import (
    CachingAllocator,
    MiB,
    StitchingAllocator,
    peak_live,
    simulate,
    trace_from_schedule,
)
from minigraph.viz.allocators import (
    plot_allocator_timeline,
    plot_allocators,
    plot_arena,
    plot_static,
)

# %% [markdown]
# ## 1. What an online allocator sees
#
# A training step of an MLP with MiB-sized activations (built symbolically: no array is
# made, so it can be as large as we like). `trace_from_schedule` runs its schedule in our
# heads: each tensor is allocated at the op that makes it and freed after its last reader.

# %%
step = wide_mlp(widths=(1024, 4096, 1024, 2048, 512), batch=256)
trace = trace_from_schedule(step)
print(len(trace), "events, the first ones:")
for ev in trace[:6]:
    print("  ", ev)
print("most bytes alive at once:", peak_live(trace) / MiB, "MiB;",
      "theoretical minimum of the schedule:", mg.liveness(step).theoretical_minimum() / MiB, "MiB")

# %% [markdown]
# The peak of the trace *is* the theoretical minimum of lesson 02: no allocator, online or
# static, can hold these tensors in less. The question is how much more each one needs.
#
# ## 2. A hole too small (MODeL, figure 4)
#
# Four events are enough. `A` (4 MiB) and `B` (2 MiB) are allocated, `A` is freed, then
# `C` (6 MiB) arrives. First fit put `A` at the bottom; its hole is too small for `C`, so
# the arena grows. A static planner, which knew `C` was coming, left room for it.

# %%
HOLE = [("alloc", "A", 4 * MiB), ("alloc", "B", 2 * MiB), ("free", "A", 0),
        ("alloc", "C", 6 * MiB), ("free", "B", 0), ("free", "C", 0)]
ff = simulate(HOLE, "first-fit")
print(ff.summary())
fig, axes = plt.subplots(1, 2, figsize=(10, 3))
plot_arena(ff, axes[0], labels=True)
plot_static(static_plan(HOLE, "greedy-size"), axes[1], labels=True)
plt.tight_layout()
plt.show()

# %% [markdown]
# Grey is reserved memory; coloured rectangles are live tensors; grey with nothing on it
# is free. At the event where `C` is allocated the arena holds 12 MiB for 8 MiB of live
# tensors: 4 MiB of **fragmentation**, free bytes in the wrong place.
#
# ## 3. First fit and best fit on the training step
#
# Both allocators split a free block when they take part of it and coalesce a freed block
# with its free neighbours. When nothing fits, the arena grows at the top (like `sbrk`).

# %%
results = {name: simulate(trace, name) for name in ("first-fit", "best-fit")}
for r in results.values():
    print(r.summary())
fig, axes = plt.subplots(1, 3, figsize=(15, 3.4))
plot_arena(results["first-fit"], axes[0])
plot_arena(results["best-fit"], axes[1])
plot_static(static_plan(trace, "greedy-size"), axes[2])
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 4. PyTorch's caching allocator
#
# `CachingAllocator` follows the rules DSA-SA lists (each rule is one method in
# `caching.py`):
#
# * sizes round up to 512 bytes; requests up to 1 MiB use the **small pool**, larger ones
#   the **large pool**, so a small tensor never splits a large block;
# * a request the cache cannot serve gets a new **segment** from the device (`cudaMalloc`):
#   2 MiB for a small request, 20 MiB for one under 10 MiB, else the size rounded to 2 MiB;
# * the best-fitting cached block is taken and split when the rest is worth keeping;
# * a freed block goes back to the cache, never to the device - until the device is full:
#   then the cache is emptied (`cudaFree`) and the request retried.

# %%
c = CachingAllocator()
cached = c.replay(trace)
print(cached.summary())
print("segments:", sorted(s.size // MiB for s in c.segments.values()), "MiB")
print("rounding: 1 byte ->", c.round_size(1), "| 1200 ->", c.round_size(1200),
      "| a 5 MiB request gets a segment of", c.allocation_size(5 * MiB) // MiB, "MiB")
plot_arena(cached)
plt.show()

# %% [markdown]
# Segments are where the caching allocator's memory goes: a 20 MiB segment for a 4 MiB
# activation reserves more than the activation, and a block split off it can only be
# reused by requests that fit. Two knobs PyTorch gives against fragmentation:
# `max_split_size` (never split blocks larger than this) and `roundup_power2_divisions`
# (round sizes to a few steps per power of two, so that freed blocks fit later requests).

# %%
for opts in ({}, {"max_split_size": 8 * MiB}, {"max_split_size": 32 * MiB},
             {"roundup_power2_divisions": 4}):
    r = simulate(trace, "caching", **opts)
    print(f"{str(opts):34} reserved {r.peak_reserved / MiB:6.1f} MiB, "
          f"{r.device_mallocs} cudaMalloc calls")

# %% [markdown]
# A knob can hurt: with `max_split_size` at 8 MiB, what is left of a 20 MiB segment after
# a 4 MiB activation (16 MiB) counts as "oversize", so no smaller request may use it and
# every 4 MiB activation gets a segment of its own. Set above the 20 MiB segments, it
# changes nothing here. This step's sizes are powers of two already, so power-of-two
# rounding changes nothing either; it helps when odd sizes come and go.
#
# ## 5. GMLake: stitch free chunks instead of asking for more
#
# With CUDA's virtual memory API, physical chunks that are not next to each other can be
# mapped side by side into one virtual range. GMLake keeps the caching allocator for small
# requests; a large request takes the best-fitting free block, else **stitches** several
# free blocks, else asks the device only for what is missing. Below, `c` (20 MiB) is made
# of the two 12 MiB holes left by `a` and `b`: the two pieces share a colour.

# %%
STITCH = [("alloc", "a", 12 * MiB), ("alloc", "b", 12 * MiB), ("alloc", "x", 12 * MiB),
          ("free", "a", 0), ("free", "b", 0), ("alloc", "c", 20 * MiB)]
g = StitchingAllocator()
stitched = g.replay(STITCH)
print(stitched.summary())
print(simulate(STITCH, "caching").summary())
print("pieces of c:", [(b.addr // MiB, b.size // MiB) for b in g.live["c"]], "(MiB: address, size)")
plot_arena(stitched, labels=True)
plt.show()

# %% [markdown]
# By construction GMLake never needs more than the caching allocator on the same trace:
# its large pool grows only when all its free bytes together are too few, and then only to
# the live bytes rounded up to 2 MiB, while the caching allocator holds every live byte
# too, in segments that are multiples of 2 MiB. A quick check on random traces (the tests
# check this with hypothesis after every event):

# %%
rng = random.Random(0)
worst = 0
for _ in range(200):
    live, tr = [], []
    for k in range(40):
        if live and rng.random() < 0.45:
            tr.append(("free", live.pop(rng.randrange(len(live))), 0))
        else:
            tr.append(("alloc", k, rng.choice([rng.randint(1, MiB), rng.randint(MiB, 24 * MiB)])))
            live.append(k)
    diff = simulate(tr, "gmlake").peak_reserved - simulate(tr, "caching").peak_reserved
    worst = max(worst, diff)
print("largest (gmlake - caching) reserved over 200 random traces:", worst, "bytes")

# %% [markdown]
# The price of stitching is paid elsewhere: each stitch maps virtual memory (a driver
# call), and real VMM maps whole 2 MiB chunks where this model lets any free block be a
# piece - so the real GMLake rounds large blocks up and can waste part of a chunk.
#
# ## 6. Recomputation breaks the single peak
#
# Without recomputation, memory rises through the forward pass and falls through the
# backward pass: one peak. DSA-SA observes that allocators then show little fragmentation
# at that peak. DTR (lesson 07) frees and recomputes tensors all through the step:
# allocations of every size come and go around long-lived ones many times over (DSA-SA,
# figure 2; Coop). If the DTR runtime is installed we replay the events of one of its
# runs; otherwise a hand-written trace in the same spirit: tensors freed early and
# allocated again later, between long-lived ones.

# %%
runs = dtr_runs(step, ratios=(0.6,))
if runs:
    label, remat = next(iter(runs.items()))
    print(f"a DTR run with a budget of {label[4:]} of its no-rematerialisation arena:",
          len(remat), "events")
else:
    label, remat = "hand-written", []
    size = {k: (2 + k % 3) * MiB for k in range(6)}
    for k in range(6):                          # forward: x_k stays, y_k is temporary
        remat += [("alloc", f"x{k}", size[k]), ("alloc", f"y{k}", 3 * MiB),
                  ("free", f"y{k}", 0)]
    remat += [("free", f"x{k}", 0) for k in (0, 2, 4)]   # evicted: holes between x1, x3, x5
    for k in (5, 4, 3, 2, 1, 0):                # backward
        if k % 2 == 0:
            remat.append(("alloc", f"x{k}", size[k]))     # recomputed
        remat += [("alloc", f"g{k}", 5 * MiB), ("free", f"x{k}", 0), ("free", f"g{k}", 0)]
    print("no DTR runtime here: a hand-written recomputation trace of", len(remat), "events")
remat_results = [simulate(remat, n) for n in ("first-fit", "caching", "gmlake")]
for r in remat_results:
    print(r.summary())
print("reserved / peak requested:")
for r in remat_results:
    print(f"  {r.name:10} one-peak schedule x{simulate(trace, r.name).ratio:.3f}, "
          f"with recomputation x{r.ratio:.3f}")
plot_allocator_timeline(remat_results)
plt.show()

# %% [markdown]
# The dashed line is no longer one hill: the requested bytes rise and fall again and
# again, while each allocator's reserved line only ever climbs. Whether recomputation
# makes a given allocator *relatively* worse depends on the trace (compare the two
# columns above, and the DTR rows of `benchmarks/allocators.py`); what it always does is
# give the holes many more chances to matter, since every recomputed tensor must find a
# place again.

# %% [markdown]
# ## 7. Everything side by side
#
# `compare_allocators` puts the rows together: no reuse, the online allocators, every
# registered static planner, and the minimum. Static planners know the future, so they
# reach (or come close to) the minimum; online allocators pay for not knowing it.

# %%
rows = compare_allocators(step, time_limit=0.5, dtr={label: remat})
print(format_rows([r for r in rows if r.method in
                   ("no reuse", "first-fit", "best-fit", "caching", "gmlake", "refcount",
                    "greedy-size", "bestfit", "minimum")]))
plot_allocators(rows)
plt.show()

# %% [markdown]
# ## Exercises
#
# **1.** Write a trace (at most 8 events) on which **best fit** reserves less than **first
# fit** (`simulate(t, "best-fit").peak_reserved < simulate(t, "first-fit").peak_reserved`).
# Put it in `TRACE_1`.
#
# **2.** After `PREFIX` below, the caching allocator holds one 20 MiB segment with 10 MiB
# free in it. Find a request size `SIZE_2` (bytes) that is *no larger than the free bytes*
# but still makes it call `cudaMalloc` for a new segment. Why does that happen?
#
# **3.** Without running anything: how many bytes does the caching allocator reserve for
# the `HOLE` trace of section 2? Put the number in `ANSWER_3`.

# %%
PREFIX = [("alloc", "a", 8 * MiB), ("alloc", "b", 8 * MiB), ("alloc", "c", 2 * MiB),
          ("free", "a", 0)]
TRACE_1 = None   # e.g. [("alloc", "a", 3 * MiB), ...]
SIZE_2 = None    # e.g. 5 * MiB
ANSWER_3 = None  # e.g. 12 * MiB

# %%
def check_exercises():
    if TRACE_1 is None:
        print("1: not done yet")
    else:
        bf = simulate(TRACE_1, "best-fit").peak_reserved
        ff = simulate(TRACE_1, "first-fit").peak_reserved
        ok = len(TRACE_1) <= 8 and bf < ff
        print(f"1: {'right' if ok else 'not quite'}: best fit {bf / MiB:g} MiB, "
              f"first fit {ff / MiB:g} MiB")
    if SIZE_2 is None:
        print("2: not done yet")
    else:
        a = CachingAllocator()
        a.replay(PREFIX)
        free, largest, calls = a.free_bytes(), a.largest_free(), a.device_mallocs
        a.malloc("d", SIZE_2)
        ok = a.round_size(SIZE_2) <= free and a.device_mallocs > calls
        print(f"2: {'right' if ok else 'not quite'}: {free / MiB:g} MiB free, the largest "
              f"free block {largest / MiB:g} MiB; the request made {a.device_mallocs - calls} device "
              "call(s). Free bytes in two pieces cannot hold one tensor: fragmentation.")
    if ANSWER_3 is None:
        print("3: not done yet")
    else:
        truth = simulate(HOLE, "caching").peak_reserved
        print(f"3: {'right' if ANSWER_3 == truth else 'not quite'}: {truth / MiB:g} MiB - "
              "A (4 MiB) gets a 20 MiB segment; B and C fit in the rest of it")


check_exercises()

# %% [markdown]
# ## Summary
#
# * An online allocator sees one request at a time; the holes it leaves when tensors of
#   other sizes come and go are **fragmentation**: reserved bytes that no request can use.
# * First fit and best fit grow one arena; PyTorch's caching allocator rounds requests,
#   keeps small and large pools, carves big segments and never gives memory back until it
#   must - fast (few `cudaMalloc` calls), at the price of reserved memory.
# * GMLake stitches free blocks from anywhere into one virtual range, so its large pool
#   grows only when the free bytes *together* are too few: never more than caching.
# * A static plan knows every lifetime and packs them near the theoretical minimum; that
#   is what the static planners of lessons 03-06 buy. Recomputation (DTR) turns one peak
#   into many and makes the online allocators' holes matter.

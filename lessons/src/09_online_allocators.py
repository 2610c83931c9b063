# %% [markdown]
# # 09 · Online allocators and fragmentation
#
# **The idea.** A static planner sees every tensor's whole life before it places anything.
# A framework's allocator does not: it gets `alloc` and `free` calls one at a time and must
# answer each at once, for good. So it guesses, and a wrong guess leaves a **hole**: free
# bytes between live tensors, too small or in the wrong place for the request that comes
# next. Then the allocator asks the device for more, although enough bytes are free
# *in total*. That waste is **fragmentation**, and it is the price of not knowing the
# future.
#
# Here we replay one training step through the allocators frameworks use - first fit,
# best fit, PyTorch's caching allocator - draw the holes they leave, and compare them with
# a static plan and the theoretical minimum. Lesson 09b shows how virtual memory lets an
# allocator fill the holes after all.
#
# **Sources.** MODeL's [Steiner 2023] and ROAM's [Shu 2023] pictures of a hole
# too small to use, Coop's description of first fit with coalescing [Zhang 2023], DSA-SA's
# [Imanishi 2024] notes on PyTorch's caching allocator (512-byte rounding, small and large pools,
# split blocks, `max_split_size`, power-of-two rounding, `cudaFree` only when memory runs out).
# The code is `minigraph/memory/online/` (read `trace.py`, `base.py`, `arena.py`,
# `caching.py`); the comparison with the static planners is
# `minigraph/experiments/allocators.py`, and the pictures are drawn by
# `minigraph/viz/allocator_plots.py`.

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

from minigraph.examples import wide_mlp
from minigraph.experiments.allocators import compare_allocators, format_rows, static_plan
from minigraph.lessons import check_answers, l09
from minigraph.memory.online import (
    CachingAllocator,
    MiB,
    peak_live,
    replay_allocator,
    trace_from_schedule,
)
from minigraph.viz.allocator_plots import plot_allocators, plot_arena, plot_static

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
minimum = mg.liveness(step).theoretical_minimum()
print("most bytes alive at once:", peak_live(trace) / MiB, "MiB;",
      "theoretical minimum of the schedule:", minimum / MiB, "MiB")
assert peak_live(trace) == minimum

# %% [markdown]
# The peak of the trace *is* the theoretical minimum of lesson 02: no allocator, online or
# static, can hold these tensors in less. The question is how much more each one needs.
#
# ## 2. A hole too small (MODeL, figure 4)
#
# A handful of events is enough. `A` (4 MiB) and `B` (2 MiB) are allocated, `A` is
# freed, then `C` (6 MiB) arrives; the last events free the rest (the cell counts them).
# First fit put `A` at the bottom; its hole is too small for `C`, so the arena grows. A
# static planner, which knew `C` was coming, left room for it.

# %%
HOLE = [("alloc", "A", 4 * MiB), ("alloc", "B", 2 * MiB), ("free", "A", 0),
        ("alloc", "C", 6 * MiB), ("free", "B", 0), ("free", "C", 0)]
before_c = HOLE.index(("alloc", "C", 6 * MiB))
print(f"{len(HOLE)} events; the hole is made by the first {before_c}, C's allocation is "
      f"event {before_c + 1}, the other {len(HOLE) - before_c - 1} free what is left")
ff = replay_allocator(HOLE, "first-fit")
print(ff.summary())
assert (ff.peak_reserved, ff.peak_allocated, ff.fragmentation) == (12 * MiB, 8 * MiB, 4 * MiB)
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
results = {name: replay_allocator(trace, name) for name in ("first-fit", "best-fit")}
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
knobs = {}
for name, opts in (("default", {}), ("max_split_size 8 MiB", {"max_split_size": 8 * MiB}),
                   ("max_split_size 32 MiB", {"max_split_size": 32 * MiB}),
                   ("roundup_power2_divisions 4", {"roundup_power2_divisions": 4})):
    knobs[name] = r = replay_allocator(trace, "caching", **opts)
    print(f"{name:28} reserved {r.peak_reserved / MiB:6.1f} MiB, "
          f"{r.device_mallocs} cudaMalloc calls")
base = knobs["default"]
assert knobs["max_split_size 8 MiB"].peak_reserved > base.peak_reserved
assert knobs["max_split_size 8 MiB"].device_mallocs > base.device_mallocs
assert knobs["max_split_size 32 MiB"].peak_reserved == base.peak_reserved
assert knobs["roundup_power2_divisions 4"].peak_reserved == base.peak_reserved

# %% [markdown]
# A knob can hurt: with `max_split_size` at 8 MiB, what is left of a 20 MiB segment after
# a 4 MiB activation (16 MiB) counts as "oversize", so no smaller request may use it, and
# the allocator asks the device for more segments and reserves more. Set above the 20 MiB
# segments, it changes nothing here. This step's sizes are powers of two already, so
# power-of-two rounding changes nothing either; it helps when odd sizes come and go. (The
# cell asserts each of these comparisons.)

# %% [markdown]
# ## 5. Everything side by side
#
# `compare_allocators` puts the rows together: no reuse, the online allocators of this
# lesson, every registered static planner, and the minimum. Static planners know the
# future; the question is what they make of it.

# %%
ONLINE = ("first-fit", "best-fit", "caching")
rows = compare_allocators(step, time_limit=0.5, allocators=ONLINE)
display(Markdown(format_rows([r for r in rows if r.method in
                              ("no reuse", *ONLINE, "refcount", "greedy-size", "bestfit",
                               "minimum")])))
ratio = {r.method: r.ratio for r in rows}
online = min(ratio[m] for m in ONLINE)
print(f"offset planners bestfit x{ratio['bestfit']:.3f}, greedy-size "
      f"x{ratio['greedy-size']:.3f}; refcount x{ratio['refcount']:.3f}; "
      f"best online allocator x{online:.3f} (of the minimum)")
offline = (ratio["bestfit"], ratio["greedy-size"])
assert min(offline) == 1.0 and max(offline) < online
plot_allocators(rows)
plt.show()

# %% [markdown]
# One of the offset planners of lesson 06 (`bestfit`, `greedy-size`) reaches the minimum,
# and both reserve less than every online allocator (asserted above). Knowing the future
# is not enough by itself: `refcount`, MXNet's free pool (lesson 03), also plans offline,
# but it reuses freed buffers whole instead of placing each tensor at an offset, so how
# close it comes depends on how well the sizes match (its line above).

# %% [markdown]
# ## Exercises
#
# **1.** Write a trace (at most 8 events) on which **best fit** reserves less than **first
# fit**: `replay_allocator(t, "best-fit").peak_reserved` below
# `replay_allocator(t, "first-fit").peak_reserved`. Put it in `TRACE_1`.
#
# **2.** After `PREFIX` below, the caching allocator holds one segment with some bytes free
# in it (the cell prints both). Find a request size `SIZE_2` (bytes) that is *no larger
# than the free bytes* but still makes it call `cudaMalloc` for a new segment. Why does
# that happen?
#
# **3.** Without running anything: how many bytes does the caching allocator reserve for
# the `HOLE` trace of section 2? Put the number in `ANSWER_3`.

# %%
PREFIX = l09.PREFIX
print("PREFIX:", PREFIX)
after = CachingAllocator()
after.replay(PREFIX)
print("segments:", [s.size // MiB for s in after.segments.values()], "MiB; free:",
      after.free_bytes() / MiB, "MiB")
TRACE_1 = None   # e.g. [("alloc", "a", 3 * MiB), ...]
SIZE_2 = None    # e.g. 5 * MiB
ANSWER_3 = None  # e.g. 12 * MiB

# %%
check_answers({1: (TRACE_1, l09.exercise_1), 2: (SIZE_2, l09.exercise_2),
               3: (ANSWER_3, l09.exercise_3)})

# %% [markdown]
# ## Summary
#
# * An online allocator sees one request at a time; the holes it leaves when tensors of
#   other sizes come and go are **fragmentation**: reserved bytes that no request can use.
# * First fit and best fit grow one arena; PyTorch's caching allocator rounds requests,
#   keeps small and large pools, carves big segments and never gives memory back until it
#   must - fast (few `cudaMalloc` calls), at the price of reserved memory.
# * A static offset plan knows every lifetime and packs the tensors at the theoretical
#   minimum here; that is what the offset planners of lesson 06 buy (a pool of whole
#   buffers, lesson 03's refcount, may not).
# * Next, lesson 09b: virtual memory lets an allocator fill its holes after all (GMLake,
#   PyTorch's expandable segments), and recomputation gives the holes many more chances
#   to matter.

# %% [markdown]
# # 09 · Online allocators and fragmentation
#
# **Goal.** A static planner sees every tensor's whole life before it places anything. A
# framework's allocator does not: it gets `alloc` and `free` calls one at a time and must
# answer each at once. Here we replay the same training step through the allocators that
# real frameworks use - first fit, best fit, PyTorch's caching allocator, GMLake's virtual
# memory stitching, PyTorch's expandable segments - draw the holes they leave, and compare
# them with a static plan and the theoretical minimum.
#
# **Sources.** MODeL's [Steiner 2023] and ROAM's [Shu 2023] pictures of a hole
# too small to use, Coop's description of first fit with coalescing [Zhang 2023], DSA-SA's
# [Imanishi 2024] notes on PyTorch's caching allocator (512-byte rounding, small and large pools,
# split blocks, `max_split_size`, power-of-two rounding, `cudaFree` only when memory runs out),
# GMLake's stitching of non-contiguous physical chunks [Guo 2024], and PyTorch's note on
# expandable segments in `CUDACachingAllocator.cpp` [PyTorch CUDA]. The code is
# `minigraph/memory/online/` (read `trace.py`, `base.py`, then one allocator per file);
# the comparison with the static planners is `minigraph/experiments/allocators.py`, and
# the pictures are drawn by `minigraph/viz/allocator_plots.py`.

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
from IPython.display import Markdown, display

from minigraph.examples import wide_mlp
from minigraph.experiments.allocators import (
    compare_allocators,
    dtr_runs,
    format_rows,
    static_plan,
)
from minigraph.lessons import check_answers, l09
from minigraph.memory.online import (
    CachingAllocator,
    MiB,
    StitchingAllocator,
    make_allocator,
    peak_live,
    replay_allocator,
    trace_from_schedule,
)
from minigraph.viz.allocator_plots import (
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
print(replay_allocator(STITCH, "caching").summary())
print("pieces of c:", [(b.addr // MiB, b.size // MiB) for b in g.live["c"]], "(MiB: address, size)")
assert len(g.live["c"]) == 2 and stitched.peak_reserved < replay_allocator(STITCH, "caching").peak_reserved
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
    diff = replay_allocator(tr, "gmlake").peak_reserved - replay_allocator(tr, "caching").peak_reserved
    worst = max(worst, diff)
print("largest (gmlake - caching) reserved over 200 random traces:", worst, "bytes")
assert worst <= 0

# %% [markdown]
# The price of stitching is paid elsewhere: each stitch maps virtual memory (a driver
# call), and real VMM maps whole 2 MiB chunks where this model lets any free block be a
# piece - so the real GMLake rounds large blocks up and can waste part of a chunk.
#
# ## 6. PyTorch's expandable segments: one segment that grows
#
# PyTorch's own answer to fragmentation uses the same virtual memory API as GMLake, the
# other way round. With `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` the caching
# allocator reserves one huge *virtual* range per pool and maps physical pages into it
# only as needed - 2 MiB pages in the small pool, 20 MiB pages in the large one, so that
# map calls stay few. A request no cached block serves does not get a segment of its own:
# the free block at the end of the segment is extended by the missing pages. Blocks are
# split whenever 512 bytes are left, and freed blocks coalesce across the whole segment.
# `ExpandableAllocator` (`expandable.py`) follows `CUDACachingAllocator.cpp`; its
# docstring lists what is simplified (one stream, a reservation that never runs out).
# `expandable-2m` is the same with 2 MiB pages in the large pool too.
#
# PyTorch's note motivates it with a batch that grows by one: four tensors of 12 MiB, all
# freed, then four of 13 MiB.

# %%
BATCH = ([("alloc", f"n{i}", 12 * MiB) for i in range(4)]
         + [("free", f"n{i}", 0) for i in range(4)]
         + [("alloc", f"m{i}", 13 * MiB) for i in range(4)]
         + [("free", f"m{i}", 0) for i in range(4)])
RELATIVES = ("caching", "expandable", "expandable-2m", "gmlake")
batch = {name: replay_allocator(BATCH, name) for name in RELATIVES}
for r in batch.values():
    print(r.summary())
assert [batch[n].peak_reserved // MiB for n in RELATIVES] == [104, 60, 52, 52]
for n in ("caching", "expandable"):
    r = batch[n]
    print(f"{n}: {r.peak_requested / MiB:g} MiB requested at the peak, "
          f"{r.peak_allocated / MiB:g} MiB handed out: each 13 MiB request rounded up to "
          f"{(r.peak_allocated // 4) / MiB:g} MiB" if r.peak_allocated != r.peak_requested
          else f"{n}: handed out exactly what was requested")
fig, axes = plt.subplots(1, 2, figsize=(11, 3.2))
plot_arena(batch["caching"], axes[0], labels=True)
plot_arena(batch["expandable"], axes[1], labels=True)
plt.tight_layout()
plt.show()

# %% [markdown]
# Each title gives two peaks: *handed out* is what the allocator gave the tensors, each
# request rounded up by its rules, *requested* what the program asked for (`summary()`
# reports that one). The caching allocator makes a new segment for a large request
# rounded up to 2 MiB and splits a block only when more than 1 MiB would be left, so each
# 13 MiB tensor gets a whole 14 MiB segment (the lines above the picture).
#
# The caching allocator gave each 12 MiB tensor a 12 MiB segment; a 13 MiB tensor fits in
# none of them, so it asks for four more (left: the "slivers" of PyTorch's note). The
# expandable segment holds the first batch in three 20 MiB pages; freed, they are one free
# block, and the second batch tiles it without a single new map call (right). The numbers
# (asserted in the cell): caching 104 MiB, expandable 60 MiB, with 2 MiB pages 52 MiB -
# as little as GMLake, which stitches the 13 MiB tensors out of the 12 MiB holes.
#
# On section 5's trace the two 12 MiB holes lie side by side in one segment, so they
# coalesce and the 20 MiB request needs no stitching. But pages have a price: a lone
# 12 MiB tensor maps a whole 20 MiB page.

# %%
one = [("alloc", "t", 12 * MiB), ("free", "t", 0)]
for name in RELATIVES:
    print(f"{name:14} STITCH trace {replay_allocator(STITCH, name).peak_reserved / MiB:5.1f} MiB; "
          f"one 12 MiB tensor {replay_allocator(one, name).peak_reserved / MiB:5.1f} MiB")
assert replay_allocator(STITCH, "expandable").peak_reserved < replay_allocator(STITCH, "caching").peak_reserved
assert replay_allocator(one, "expandable").peak_reserved > replay_allocator(one, "caching").peak_reserved

# %% [markdown]
# On the training step of section 1, each of the four relatives, with the number of device
# calls (`cudaMalloc` for caching and GMLake, map calls for the expandable segments) and the
# pages mapped:

# %%
relatives = {}
for name in RELATIVES:
    a = make_allocator(name)
    relatives[name] = r = a.replay(trace)
    pages = getattr(a, "pages_mapped", None)
    print(f"{name:14} reserved {r.peak_reserved / MiB:5.1f} MiB (x{r.ratio:.3f}), "
          f"{r.device_mallocs:2} device calls" + (f", {pages} pages" if pages else ""))
res = {n: r.peak_reserved for n, r in relatives.items()}
assert res["gmlake"] <= res["expandable-2m"] <= res["expandable"] < res["caching"]

# %% [markdown]
# Here the expandable segment beats the caching allocator, 2 MiB pages do a little better
# than 20 MiB pages at the price of more map calls, and GMLake, free to stitch any free
# blocks, does best (the order is asserted). GMLake's large pool is never bigger than an
# expandable segment's: it grows only to the live large bytes rounded to 2 MiB, while the
# expandable segment holds every live byte in whole pages (`tests/test_expandable.py`
# checks it after every event of random traces). Holes *inside* the segment remain: a
# large request that no hole fits still extends the end.
#
# The other half of the idea is giving memory back. `torch.cuda.empty_cache()` can only
# `cudaFree` segments with nothing alive in them; an expandable segment unmaps every whole
# free page, wherever it lies. Below, the cache is emptied at the first event after the
# peak where half the peak's bytes are in use:

# %%
peak = max(range(len(trace)), key=lambda k: relatives["caching"].history[k].allocated)
half = next(k for k in range(peak, len(trace))
            if relatives["caching"].history[k].allocated <= relatives["caching"].peak_allocated / 2)
kept = {}
for name in ("caching", "expandable", "expandable-2m"):
    a = make_allocator(name)
    a.replay(trace[:half + 1])
    held = a.reserved
    a.release_cached_blocks()
    kept[name] = a.reserved
    print(f"{name:14} after event {half}: {a.allocated / MiB:4.1f} MiB in use, "
          f"{held / MiB:4.1f} MiB held, {kept[name] / MiB:4.1f} MiB after emptying the cache")
assert kept["expandable-2m"] < min(kept["caching"], kept["expandable"])

# %% [markdown]
# With 2 MiB pages the expandable segment keeps the least (asserted); with 20 MiB pages a
# page goes back only when all 20 MiB of it are free, so it may keep as much as the caching
# allocator (compare the lines above).
#
# ## 7. Recomputation breaks the single peak
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
remat_results = [replay_allocator(remat, n) for n in ("first-fit", "caching", "expandable", "gmlake")]
for r in remat_results:
    print(r.summary())
print("reserved / peak requested:")
for r in remat_results:
    print(f"  {r.name:10} one-peak schedule x{replay_allocator(trace, r.name).ratio:.3f}, "
          f"with recomputation x{r.ratio:.3f}")
assert all(r.device_frees == 0 for r in remat_results), "no allocator gave memory back"
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
# ## 8. Everything side by side
#
# `compare_allocators` puts the rows together: no reuse, the online allocators, every
# registered static planner, and the minimum. Static planners know the future; the
# question is what they make of it.

# %%
rows = compare_allocators(step, time_limit=0.5, dtr={label: remat})
display(Markdown(format_rows([r for r in rows if r.method in
                              ("no reuse", "first-fit", "best-fit", "caching", "expandable",
                               "expandable-2m", "gmlake",
                               "refcount", "greedy-size", "bestfit", "minimum")])))
ratio = {(r.trace, r.method): r.ratio for r in rows}
traces = sorted({r.trace for r in rows})
for t in traces:
    online = min(ratio[t, m] for m in ("first-fit", "best-fit", "caching", "expandable",
                                       "expandable-2m", "gmlake"))
    print(f"{t}: offset planners bestfit x{ratio[t, 'bestfit']:.3f}, greedy-size "
          f"x{ratio[t, 'greedy-size']:.3f}; refcount x{ratio[t, 'refcount']:.3f}; "
          f"best online allocator x{online:.3f} (of the minimum)")
    offline = (ratio[t, "bestfit"], ratio[t, "greedy-size"])
    assert min(offline) == 1.0 and max(offline) < online
plot_allocators(rows)
plt.show()

# %% [markdown]
# On each trace one of the offset planners of lesson 06 (`bestfit`, `greedy-size`) reaches
# the minimum, and both reserve less than every online allocator (asserted above). Knowing the future
# is not enough by itself: `refcount`, MXNet's free pool (lesson 03), also plans offline,
# but it reuses freed buffers whole instead of placing each tensor at an offset, so how
# close it comes depends on how well the sizes match - compare its two lines above.

# %% [markdown]
# ## Exercises
#
# **1.** Write a trace (at most 8 events) on which **best fit** reserves less than **first
# fit** (`replay_allocator(t, "best-fit").peak_reserved < replay_allocator(t, "first-fit").peak_reserved`).
# Put it in `TRACE_1`.
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
# * GMLake stitches free blocks from anywhere into one virtual range, so its large pool
#   grows only when the free bytes *together* are too few: never more than caching.
# * PyTorch's expandable segments use the same virtual memory API to grow one segment per
#   pool page by page: no slivers when sizes creep up, free pages can be unmapped from
#   anywhere, but holes inside the segment remain and each map costs a whole page.
# * A static offset plan knows every lifetime and packs the tensors at the theoretical
#   minimum here; that is what the offset planners of lesson 06 buy (a pool of whole
#   buffers, lesson 03's refcount, may not). Recomputation (DTR) turns one peak into many
#   and gives the online allocators' holes many more chances to matter.

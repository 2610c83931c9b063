# %% [markdown]
# # 09b · Virtual memory against fragmentation: GMLake and expandable segments
#
# **The idea.** In lesson 09 an allocator asked the device for more memory while enough
# bytes were free, because they were free in the wrong places: a tensor needs one
# *contiguous* range of addresses. But the addresses a kernel sees are virtual. CUDA's
# virtual memory API (`cuMemCreate`, `cuMemMap`) lets an allocator take physical chunks
# from anywhere and map them side by side into one virtual range; contiguous addresses no
# longer need contiguous memory. Two allocators build on it, in opposite directions:
#
# * **GMLake** keeps many segments and, when no free block fits a large request,
#   **stitches** several free blocks into a new virtual range;
# * PyTorch's **expandable segments** keep one huge virtual range per pool and **grow** it
#   page by page, so that freed blocks always lie side by side and coalesce.
#
# We replay short traces and lesson 09's training step through both, beside PyTorch's
# caching allocator, and end where fragmentation hurts most: under recomputation.
#
# **Sources.** GMLake's stitching of non-contiguous physical chunks [Guo 2024], PyTorch's
# note on expandable segments in `CUDACachingAllocator.cpp` [PyTorch CUDA], DSA-SA
# [Imanishi 2024] and Coop [Zhang 2023] on recomputation's holes. The code is
# `minigraph/memory/online/` (`stitching.py`, `expandable.py`, beside lesson 09's
# `caching.py`); the pictures are drawn by `minigraph/viz/allocator_plots.py`.

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
from minigraph.experiments.allocators import dtr_runs
from minigraph.lessons import check_answers, l09b
from minigraph.memory.online import (
    CachingAllocator,
    MiB,
    StitchingAllocator,
    make_allocator,
    replay_allocator,
    trace_from_schedule,
)
from minigraph.viz.allocator_plots import plot_allocator_timeline, plot_arena

# %% [markdown]
# ## 1. Free bytes in the wrong segments
#
# Three tensors of 12 MiB, the first two freed, then a request of 20 MiB. The caching
# allocator of lesson 09 gave each 12 MiB tensor a segment of its own (a large request
# gets its size rounded to 2 MiB), so the two freed blocks lie in different segments and
# cannot coalesce: the cell prints the free bytes when `c` arrives, and the largest
# block among them.

# %%
STITCH = [("alloc", "a", 12 * MiB), ("alloc", "b", 12 * MiB), ("alloc", "x", 12 * MiB),
          ("free", "a", 0), ("free", "b", 0), ("alloc", "c", 20 * MiB)]
before = CachingAllocator()
before.replay(STITCH[:-1])
print("before c:", before.free_bytes() / MiB, "MiB free, the largest free block",
      before.largest_free() / MiB, "MiB, in segments of",
      [s.size // MiB for s in before.segments.values()], "MiB")
cached = replay_allocator(STITCH, "caching")
print(cached.summary())
assert before.free_bytes() > 20 * MiB > before.largest_free()
plot_arena(cached, labels=True)
plt.show()

# %% [markdown]
# More than 20 MiB are free, none of it in one block, so `c` gets a fourth segment: the
# grey holes at the bottom stay reserved and unused.
#
# ## 2. GMLake: stitch free blocks instead of asking for more
#
# GMLake keeps the caching allocator for small requests; a large request takes the
# best-fitting free block, else **stitches** several free blocks into one virtual range,
# else asks the device only for what is missing. Below, `c` (20 MiB) is made of the two
# 12 MiB holes left by `a` and `b`: the two pieces share a colour.

# %%
g = StitchingAllocator()
stitched = g.replay(STITCH)
print(stitched.summary())
print("pieces of c:", [(b.addr // MiB, b.size // MiB) for b in g.live["c"]], "(MiB: address, size)")
assert len(g.live["c"]) == 2 and stitched.peak_reserved < cached.peak_reserved
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
    diff = (replay_allocator(tr, "gmlake").peak_reserved
            - replay_allocator(tr, "caching").peak_reserved)
    worst = max(worst, diff)
print("largest (gmlake - caching) reserved over 200 random traces:", worst, "bytes")
assert worst <= 0

# %% [markdown]
# The price of stitching is paid elsewhere: each stitch maps virtual memory (a driver
# call), and real VMM maps whole 2 MiB chunks where this model lets any free block be a
# piece - so the real GMLake rounds large blocks up and can waste part of a chunk.

# %% [markdown]
# ## 3. PyTorch's expandable segments: one segment that grows
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
# On section 1's trace the two 12 MiB holes lie side by side in one segment, so they
# coalesce and the 20 MiB request needs no stitching. But pages have a price: a lone
# 12 MiB tensor maps a whole 20 MiB page.

# %%
def reserved(t, name):
    return replay_allocator(t, name).peak_reserved


one = [("alloc", "t", 12 * MiB), ("free", "t", 0)]
for name in RELATIVES:
    print(f"{name:14} STITCH trace {reserved(STITCH, name) / MiB:5.1f} MiB; "
          f"one 12 MiB tensor {reserved(one, name) / MiB:5.1f} MiB")
assert reserved(STITCH, "expandable") < reserved(STITCH, "caching")
assert reserved(one, "expandable") > reserved(one, "caching")

# %% [markdown]
# ## 4. On a training step
#
# Lesson 09's training step (an MLP with MiB-sized activations, built symbolically), its
# events replayed through each of the four relatives, with the number of device calls
# (`cudaMalloc` for caching and GMLake, map calls for the expandable segments) and the
# pages mapped:

# %%
step = wide_mlp(widths=(1024, 4096, 1024, 2048, 512), batch=256)
trace = trace_from_schedule(step)
minimum = mg.liveness(step).theoretical_minimum()
print(len(trace), "events; theoretical minimum", minimum / MiB, "MiB")
relatives = {}
for name in RELATIVES:
    a = make_allocator(name)
    relatives[name] = r = a.replay(trace)
    pages = getattr(a, "pages_mapped", None)
    print(f"{name:14} reserved {r.peak_reserved / MiB:5.1f} MiB, "
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
# ## 5. Recomputation breaks the single peak
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
remat_results = [replay_allocator(remat, n)
                 for n in ("first-fit", "caching", "expandable", "gmlake")]
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
# place again. That is the case GMLake was built for: its paper measures the fragmentation
# that recomputation and offloading cause in large-model training [Guo 2024].

# %% [markdown]
# ## Exercises
#
# **1.** Write a trace (at most 6 events) on which **GMLake** reserves less than an
# expandable segment with 2 MiB pages: `replay_allocator(t, "gmlake").peak_reserved` below
# `replay_allocator(t, "expandable-2m").peak_reserved`. Put it in `TRACE_1`.
#
# **2.** Without running anything: how many bytes does `expandable` (20 MiB pages in the
# large pool) reserve for a trace that allocates one tensor of 21 MiB and frees it? Put
# the number in `ANSWER_2`.

# %%
TRACE_1 = None   # e.g. [("alloc", "a", 12 * MiB), ...]
ANSWER_2 = None  # e.g. 21 * MiB

# %%
check_answers({1: (TRACE_1, l09b.exercise_1), 2: (ANSWER_2, l09b.exercise_2)})

# %% [markdown]
# ## Summary
#
# * A tensor needs contiguous *virtual* addresses, not contiguous memory: with CUDA's
#   virtual memory API an allocator maps physical chunks wherever its virtual ranges need
#   them.
# * GMLake stitches free blocks from anywhere into one virtual range, so its large pool
#   grows only when the free bytes *together* are too few: never more than caching.
# * PyTorch's expandable segments use the same API to grow one segment per pool page by
#   page: no slivers when sizes creep up, free pages can be unmapped from anywhere, but
#   holes inside the segment remain and each map costs a whole page.
# * Recomputation (DTR) turns one peak into many and gives the holes many more chances to
#   matter - the setting these allocators were built for.


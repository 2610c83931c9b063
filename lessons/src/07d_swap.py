# %% [markdown]
# # 07d · Memory swap: a tensor that waits, waits in host memory
#
# **Goal.** Reuse, recomputation, swap and order are the four ways to cut a network's
# memory. Lessons 02-06 reused bytes, 07-07c recomputed tensors. This lesson swaps them:
# a tensor idle for a long stretch is copied to host memory and copied back before its
# next reader. You will see its lifetime split in two, every planner pack the halves, the
# copies overlap compute on a copy stream, swap and recomputation meet at one budget, and
# the largest batch that fits a fixed device memory with each technique.
#
# **Source.** vDNN [Rhu 2016] (offload in the forward pass, prefetch before the backward),
# SwapAdvisor [Huang 2020] and Capuchin [Peng 2020] (swap or recompute, per tensor),
# POFO [Beaumont 2021] (both, optimally, on a chain). The code: `minigraph/memory/swap.py`
# (the textbook), `memory/swap_plan.py` (`plan_swap`), `runtime/swapping.py` (the
# executor's copies), `memory/planners/engine/swap_remat.py` (swap with recomputation).

# %%
import sys
from pathlib import Path

try:
    import minigraph as mg
except ModuleNotFoundError:          # a clone without `pip install -e .`: use the repo
    sys.path.insert(0, str(Path.cwd().parent))
    import minigraph as mg

import numpy as np

from minigraph.experiments.swap import (
    chain_rows,
    compare,
    largest_batch,
    largest_chain_batch,
    mlp_chain,
)
from minigraph.lessons import check_answers, l07d
from minigraph.memory.swap import Machine, Swap, copy_stream, uses, window
from minigraph.memory.swap_plan import MACHINES, plan_swap
from minigraph.models import get_model

resnet = get_model("resnet")
g = resnet.graph

# %% [markdown]
# ## 1. Why swap: tensors that wait
#
# A forward activation is read by the next forward op and then not again until the
# backward pass reaches its layer. All that time it holds device bytes. `uses` lists the
# steps that touch each tensor; the longest gaps between two uses are the candidates.

# %%
live = mg.liveness(g)
steps = uses(g, live.schedule)
gaps = sorted(((max(b - a for a, b in zip(s, s[1:])), t) for t, s in steps.items()
               if live.intervals[t].planned and len(s) > 1), reverse=True)
print(f"{len(live.schedule)} steps; the five longest waits between two uses:")
for gap, t in gaps[:5]:
    print(f"  {t:20} {live.intervals[t].bytes:>7} B, idle {gap} steps, used at {steps[t]}")

# %% [markdown]
# ## 2. The split interval
#
# Swap one such tensor. Its **front** lives from its producer until its offload has
# finished; its **back** from the start of its prefetch until its last reader. In between
# its bytes are free. Two intervals are two buffers: any planner packs them, and the one
# validator proves the plan (`SwapPlan.buffers()` is the split problem).

# %%
opts = mg.MemoryOptions(planner="bestfit")
plain = mg.plan_memory(g, opts)
budget = plain.theoretical_minimum * 3 // 4
report = plan_swap(g, budget, opts)
print("without swap: arena", plain.arena_bytes, "B, theoretical minimum",
      plain.theoretical_minimum, "B: no plan of this schedule fits", budget, "B")
print(report.summary())
s = report.swaps[0]
print(f"{s.tensor}: front [{live.intervals[s.tensor].start}, {s.until}], offloaded after "
      f"step {s.after}; back [{s.back}, {live.intervals[s.tensor].end}], first read back "
      f"at step {s.reader}")

# %% [markdown]
# The executor runs it in one arena: on NumPy each offload copies the front into a host
# buffer of its own and each prefetch copies it back into the back's bytes. Other
# tensors really use the front's bytes in between, so a wrong plan would give wrong
# numbers. The results are bit for bit those of the run without swapping.

# %%
feeds = resnet.feeds(0)
want = mg.Executor(g).run(feeds)
got = mg.Executor(g, report).run(feeds)
print("bitwise equal to the run without swapping:",
      all(np.array_equal(want[k], got[k]) for k in want))
print("footprint:", report.footprint)

# %% [markdown]
# ## 3. The copy stream, and when a transfer hides
#
# A copy takes `latency + bytes / bandwidth` on a copy stream beside the compute stream.
# An offload may overlap the ops after it, a prefetch the ops before its reader; if they
# do not cover it, an op waits (`copy_stream`). A toy: eight ops of one second each, one
# tensor of 1 GB swapped between steps 1 and 7.

# %%
ops = [1.0] * 8
print("window at 1 s a copy:", window(1, 7, ops, 1.0), "(front until, prefetch from)")
t = Swap("t", 10**9, 1, 2, 6, 7)
for bw in (1e9, 0.5e9):
    timing = copy_stream(ops, [t], Machine(bandwidth=bw, latency=0.0))
    print(f"{bw / 1e9:.1f} GB/s: step {timing.seconds:.1f} s against {timing.baseline:.1f} s,"
          f" waits {timing.waits}")

# %% [markdown]
# On the ResNet the ops are small, so the step time is mostly launches (5 us each here)
# and the copies are short. The machines differ by their link (`MACHINES`, defaults in
# docs/glossary.md): PCIe 4.0, PCIe 5.0 and NVLink-C2C, and a slow 2 GB/s one.

# %%
for name, machine in [("2 GB/s", Machine(bandwidth=2e9)), *MACHINES.items()]:
    r = plan_swap(g, budget, opts, machine=machine)
    print(f"{name:11} {len(r.swaps):3} swapped, {len(r.hidden()):3} hidden, step "
          f"{r.timing.seconds * 1e6:7.1f} us against {r.timing.baseline * 1e6:7.1f} us "
          f"(+{100 * r.timing.overhead:.1f}%)")

# %% [markdown]
# The same in the memory widget: tick **swap**, and `plan_swap` packs the split intervals
# with the planner chosen there. The budget slider is a fraction of the theoretical
# minimum without swap and starts at the lowest budget swapping reaches; the headline
# gives the swap report's device peak, host peak, bytes moved and predicted step, the
# timeline marks each offload, prefetch and late copy, and the layout draws each swapped
# tensor's front and back. Move the slider below that lowest budget to see its message.

# %%
widget = mg.memory_widget(g, planner="bestfit", swap=True)
print(widget.headline)
widget

# %% [markdown]
# ## 4. Swap against recomputation, at one budget
#
# DTR (lesson 07) recomputes instead. At the same working memory (arena + workspace) and
# with op costs in the same seconds, here are the static plan, swap, DTR and DTR+swap (DTR
# choosing per victim between dropping and swapping it, the next section) at two budgets.
# DTR+swap's bytes moved are out / in: a tensor swapped out need not come back.

# %%
for fraction in (0.75, 0.5):
    for row in compare(g, fraction):
        moved = "/".join(map(str, row.moved)) if isinstance(row.moved, tuple) else row.moved
        fit = "does not fit" if row.device is None else \
            f"device {row.device:>7} B, host {row.host:>7} B, moved {moved:>7} B each way," \
            f" +{100 * row.overhead:.1f}%"
        print(f"{fraction:.2f} x: {row.technique:8} {fit}")

# %% [markdown]
# ### DTR chooses per tensor: drop or swap
#
# DTR need not only drop. MegEngine's DTR evicts a tensor in one of two ways, drop
# (recompute it later) or swap (copy it to host memory, copy it back when needed)
# [MegEngine 2021]; Capuchin picks, per tensor, whichever costs less [Peng 2020].
# `DTROptions(evict=...)` says which: `"drop"` (DTR as in lesson 07), `"swap"` (every
# victim to the host while `host_limit` allows) or `"cheaper"` (a victim is swapped when its
# two copies, `latency + bytes / bandwidth` each, cost less than recomputing it). The costs
# are the seconds above, so a second of copying costs 1 (`cost_rate=1.0`). DTR runs one
# stream: each copy is charged in full, none hides behind compute (an upper bound on its
# time). The ResNet at half the static plan's working memory:

# %%
from minigraph.errors import ThrashError
from minigraph.memory.swap import op_seconds
from minigraph.runtime.dtr import simulate

static = mg.plan_memory(g, mg.MemoryOptions(planner="greedy-size"))
sched = static.plan.schedule
budget = int(0.5 * static.working_bytes)
for link in ("pcie4", "nvlink-c2c"):
    m = MACHINES[link]
    costs = dict(zip(sched, op_seconds(g, sched, m)))
    for evict in ("drop", "swap", "cheaper"):
        try:
            t = simulate(g, budget, costs=costs, schedule=sched, evict=evict, machine=m,
                         cost_rate=1.0)
        except ThrashError:
            print(f"{link:10} {evict:7}: thrashes")
            continue
        print(f"{link:10} {evict:7}: {t.evictions:3} evictions, {len(t.swapped):3} swapped, "
              f"{t.rematerializations:3} replays, host peak {t.host_peak:>6} B, "
              f"+{100 * (t.overhead - 1):.1f}%")

# %% [markdown]
# Dropping pays for recomputation, swapping for the link; choosing per tensor pays the
# smaller of the two, and the faster the link, the more it swaps.
#
# The trace says which tensors went where: `t.swapped` names the victims copied to host
# memory, the others in `t.evicted` were dropped, and `t.transfers` holds each copy as
# (clock, "out" or "in", tensor, bytes). The timeline of the last run above marks each copy
# out (down) and back (up) at the clock it began, with the host peak beside working memory.
# In the widget, tick DTR and choose `evict` (drop / swap / cheaper) to see the same.

# %%
from minigraph.viz.plots import plot_dtr_timeline

print("swapped:", t.swapped[:4], "...; the first copies:", t.transfers[:2])
plot_dtr_timeline(t)
#
# Which is cheaper depends on the link. On a chain of dense layers the dynamic program of
# `swap_remat.py` finds the fastest mix of keep, swap and drop at a budget [Beaumont 2021];
# taking a choice away gives swap alone and recomputation alone. As the bandwidth grows,
# swap overtakes recomputation: the crossover.

# %%
chain = mlp_chain([256] * 13, 64)
for bw in (5e9, 25e9, 100e9, 450e9):
    rows = chain_rows(chain, 0.6, Machine(bandwidth=bw))
    cells = ", ".join(f"{k} +{100 * v[1]:.1f}%" if v else f"{k} does not fit"
                      for k, v in rows.items())
    print(f"{bw / 1e9:5.0f} GB/s at 0.6 x the peak: {cells}")
print("at 0.4 x:", chain_rows(chain, 0.4))

# %% [markdown]
# ## 5. The largest batch in a fixed device memory
#
# Capuchin reports what a technique buys as the largest batch that trains in a given
# memory [Peng 2020]. The ResNet in 400 KB of working memory, and the dense chain in 1 MB
# of activations (there "both" is the dynamic program's mix):

# %%
def resnet_at(batch):
    return get_model("resnet", batch=batch).graph


for tech in ("static", "swap", "DTR", "DTR+swap"):
    print(f"resnet, {tech:8}: batch {largest_batch(resnet_at, 400_000, tech, (1, 2, 4, 8))}")
for kind in ("keep", "swap", "recompute", "both"):
    print(f"chain, {kind:9}: batch {largest_chain_batch([256] * 13, 1_000_000, kind)}")

# %% [markdown]
# ## Exercise
#
# **1.** Choose what to swap. `l07d.exercise_1_graph()` is a five-layer MLP; bring the bytes
# alive at every step to at most `l07d.exercise_1_budget()` with copies of at most
# `l07d.exercise_1_host()` bytes in host memory. Each tensor you name is swapped in its
# longest window (`l07d.swaps_for(names)`). Put the list of names in `ANSWER_1`. Hint:
# look at the step where the most bytes are alive (`mg.liveness(graph).live_bytes()`).

# %%
ex = l07d.exercise_1_graph()
print("budget", l07d.exercise_1_budget(), "B, host", l07d.exercise_1_host(), "B, peak",
      mg.liveness(ex).theoretical_minimum(), "B")

ANSWER_1 = None      # e.g. ["relu_0"]

# %%
check_answers({1: (ANSWER_1, l07d.exercise_1)})

# %% [markdown]
# ## Summary
#
# - A swapped tensor's life splits into a front and a back; every planner packs them.
# - A copy stream overlaps the copies with compute; an op waits only for what is late.
# - Swap costs bandwidth, recomputation costs FLOPs: which wins depends on the link, and
#   together they fit budgets neither reaches alone.
# - DTR can choose per evicted tensor: drop it or swap it, the cheaper of the two
#   (`DTROptions(evict="cheaper")`).

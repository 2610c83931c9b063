# %% [markdown]
# # 05b · Choosing the schedule: GE's topo optimisation
#
# **Goal.** Lesson 05's planners reach, at best, the theoretical minimum *of their
# schedule*. Here the schedule itself changes: the order the nodes run in lowers the
# minimum (GE's "topo optimisation"), first on the article's own examples, then on the
# zoo's transformer and ResNet.
#
# **Source.** The CANN article on GE memory reuse [Huawei GE], section 2. The code is
# `minigraph/memory/topo.py` (the orders of `minigraph.memory.ORDERS`); read it beside this
# lesson.

# %%
import sys
from pathlib import Path

try:
    import minigraph as mg
except ModuleNotFoundError:          # a clone without `pip install -e .`: use the repo
    sys.path.insert(0, str(Path.cwd().parent))
    import minigraph as mg

from matplotlib.figure import Figure

from minigraph.lessons import check_answers, l05b
from minigraph.models import get_model

# %% [markdown]
# ## 1. Topo optimisation: lower the minimum itself [Huawei GE, §2]
#
# A planner can at best reach the theoretical minimum *of its schedule*: the CANN article
# says each network has one minimum per topological order, and another order has another.
# `minigraph.memory.ORDERS` holds the orders: BFS, DFS, reverse DFS, GE's adjustment, a
# memory-greedy list scheduler, and "best" (try them all, keep the lowest). First the
# article's own small examples, then two models of the zoo.
#
# ### 1.1 Left branch first or right branch first? (the article's figure 10)
#
# A feeds two branches: B on the left, the chain C -> D -> E on the right; F joins them.
# The article counts steps from 1. Run the left branch first (A B C D E F) and B lives
# from step 2 to 6, beside C and D; run the right branch first (A C D E B F) and B lives
# only 5..6, but A now lives 1..5 instead of 1..3 (the second cell below prints our
# lives and asserts these). The article gives no sizes; we give
# each tensor 8 rows of `cols[X]` float32 columns (a matmul by a parameter sets the width),
# and try two settings: B and D large, or A and D large. `named` gives each node the
# letter of the figure.

# %%
from minigraph.memory import schedule
from minigraph.memory.topo import ge_adjust
from minigraph.models import named


def article_graph(cols, a_is_variable=False, f_reads_a=False, late_reader=False):
    """Figure 10 of [Huawei GE, §2.1]. `a_is_variable`: A is a parameter (figure 11);
    `f_reads_a`: F reads A too; `late_reader`: a node G after F reads A."""
    with mg.name_scope():
        if a_is_variable:
            A = mg.param("A", (8, cols["A"]))       # its own storage, never reused
        else:
            A = named(mg.relu(mg.input("x", (8, cols["A"]))), "A")

        def layer(t, name):
            return named(t @ mg.param("W" + name, (t.shape[1], cols[name])), name)

        B = layer(A, "B")                            # built first: the program runs it first
        E = layer(layer(layer(A, "C"), "D"), "E")
        F = named(mg.concat([E, B, A] if f_reads_a else [E, B], axis=1), "F")
        outputs = [F, named(mg.sum(A), "G")] if late_reader else [F]
        return mg.Graph(outputs, name="figure_10")


def show(label, graph, order):
    """Print an order (a name of ORDERS or a list of nodes), its theoretical minimum in
    exact bytes and every planned tensor's life, counting steps from 1 as the article."""
    sched = schedule(graph, order) if isinstance(order, str) else list(order)
    live = mg.liveness(graph, sched, alignment=1)
    spans = {iv.name: (iv.start + 1, iv.end + 1) for iv in live.planned()}
    print(f"{label:16} {' '.join(sched):14} minimum {live.theoretical_minimum():6d} B   "
          + ", ".join(f"{t} {a}..{b}" for t, (a, b) in sorted(spans.items())))
    return sched, live.theoretical_minimum(), spans


B_LARGE = {"A": 1, "B": 1024, "C": 1, "D": 1024, "E": 1}
A_LARGE = {"A": 1024, "B": 1, "C": 1, "D": 1024, "E": 1}
mg.draw(article_graph(B_LARGE), show_tensors=False)

# %% [markdown]
# `dfs` follows A's first consumer, the left branch B; `rdfs` walks back from F's first
# input E, so it runs the right branch first.

# %%
lower = {}
for label, cols in (("B, D large", B_LARGE), ("A, D large", A_LARGE)):
    g = article_graph(cols)
    print(label)
    left = show("  dfs (left)", g, "dfs")
    right = show("  rdfs (right)", g, "rdfs")
    lower[label] = "left first" if left[1] < right[1] else "right first"
# The article's lives: left first B 2..6 and A 1..3; right first B 5..6 and A 1..5.
assert (left[2]["B"], left[2]["A"], right[2]["B"], right[2]["A"]) == ((2, 6), (1, 3),
                                                                      (5, 6), (1, 5))
print("the lower minimum:", lower)
assert len(set(lower.values())) == 2

# %% [markdown]
# The last line: with B large, right first wins (B no longer lives beside D); with A large,
# left first wins (A no longer lives beside D). A conventional order does not look at
# sizes, so which one a graph gets is luck: the article's "an uncertain result".
#
# ### 1.2 GE's adjustment, fixed rule (figure 11)
#
# GE starts from a conventional order and moves some nodes later, "to just before the
# earliest node that reads its output", only where that cannot raise the memory.
# **Fixed rule:** a node whose inputs are Variables, Consts or inputs (storage that is
# never reused) may move: moving it lengthens no reused life. The article's figure 11:
# A is a Variable, so B moves to just before F. Here A becomes a parameter (no node, so
# steps count from B), and `ge` is `ge_adjust` applied to the program order:

# %%
fig11 = article_graph(B_LARGE, a_is_variable=True)
before = show("program", fig11, "program")
after = show("ge", fig11, "ge")
assert after[0].index("B") == after[0].index("F") - 1
print(f"the adjustment lowers the minimum by {before[1] - after[1]} B "
      f"({before[1]} -> {after[1]})")

# %% [markdown]
# ### 1.3 GE's adjustment, dynamic rule: L1 and L2
#
# When an input of the node is an ordinary (reused) tensor, the article compares two steps:
# **L1**, the end of the longest life among the node's inputs, and **L2**, the first step
# that reads the node's output. If L1 > L2 the input lives past L2 anyway, so the node moves
# to just before L2 for free. Three variants of figure 10 (B and D large), where B's input
# A is an activation:
#
# - as drawn: A's last reader is C;
# - a node G, after F, reads A again;
# - F itself reads A (F = concat of E, B and A): here L1 = L2.
#
# `ge_adjust` moves on L1 = L2 as well: A is read at L2 anyway, so its life does not change.
# `strict=True` applies the article's L1 > L2 as written.

# %%
def l1_l2(graph, sched, node):
    """L1: the last step (from 1) of a planned input of `node`; L2: the first step that
    reads its outputs."""
    step = {n: k + 1 for k, n in enumerate(sched)}
    live = mg.liveness(graph, sched, alignment=1)
    ins = [live.intervals[t] for t in graph.node(node).inputs if live.intervals[t].planned]
    l1 = max(iv.end + 1 for iv in ins)
    l2 = min(step[c] for t in graph.node(node).outputs for c in graph.consumers[t])
    return l1, l2


variants = {"as drawn": {}, "G reads A": {"late_reader": True}, "F reads A": {"f_reads_a": True}}
for label, kw in variants.items():
    g = article_graph(B_LARGE, **kw)
    program = [n.name for n in g.nodes]
    l1, l2 = l1_l2(g, program, "B")
    adjusted = ge_adjust(g, program)
    strict = ge_adjust(g, program, strict=True)
    moved = adjusted.index("B") == adjusted.index("F") - 1
    moved_strict = strict.index("B") == strict.index("F") - 1
    print(f"{label}: L1 = {l1}, L2 = {l2}: B {'moves' if moved else 'stays'} "
          f"(strict L1 > L2: {'moves' if moved_strict else 'stays'})")
    was = show("  program", g, program)
    now = show("  ge_adjust", g, adjusted)
    assert moved == (l1 >= l2) and moved_strict == (l1 > l2)
    assert now[1] <= was[1] and now[2]["A"] == was[2]["A"]    # A's life never grows

# %% [markdown]
# As drawn, moving B would stretch A's life from C's step to F's, so B stays (the first
# block of lines). With a later reader of A, or with F reading A itself, A's life is the
# same before and after, and B's life shrinks to its last steps: compare the two
# minimum columns of each block.
#
# ### 1.4 On the zoo: the transformer and the ResNet
#
# The same orders on two training steps of the zoo, in exact bytes (alignment 1) and
# without in-place, so that only the order changes; each row also plans with GE's
# two-level reuse.

# %%
zoo = {}
for model, graph in (("transformer", get_model("transformer").graph), ("resnet", get_model("resnet", batch=2).graph)):
    zoo[model] = {}
    print(model)
    for order in mg.memory.ORDERS:
        rep = mg.plan_memory(graph, mg.MemoryOptions(planner="ge", order=order, alignment=1))
        zoo[model][order] = rep
        print(f"  {order:8} theoretical minimum {rep.theoretical_minimum:8,d} B   "
              f"GE arena {rep.arena_bytes:8,d} B")
    prog, ge = zoo[model]["program"], zoo[model]["ge"]
    moved = sum(a != b for a, b in zip(prog.plan.schedule, ge.plan.schedule))
    print(f"  GE's adjustment: {moved} of {len(graph.nodes)} nodes run at another step; "
          f"minimum {prog.theoretical_minimum:,} -> {ge.theoretical_minimum:,} B")
lowest = {m: min(t, key=lambda o: t[o].theoretical_minimum) for m, t in zoo.items()}
print("lowest minimum:", lowest)

# %%
fig = Figure(figsize=(11, 3.4), layout="constrained")
for ax, (model, table) in zip(fig.subplots(1, 2), zoo.items()):
    xs = range(len(table))
    ax.bar([x - 0.2 for x in xs], [r.theoretical_minimum / 1024 for r in table.values()],
           width=0.4, label="theoretical minimum")
    ax.bar([x + 0.2 for x in xs], [r.arena_bytes / 1024 for r in table.values()],
           width=0.4, label="GE two-level arena")
    ax.set_xticks(list(xs), list(table))
    ax.set_ylabel("KiB")
    ax.set_title(f"{model}: the order sets the minimum")
fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=2)
tf_min = {o: r.theoretical_minimum for o, r in zoo["transformer"].items()}
rn_min = {o: r.theoretical_minimum for o, r in zoo["resnet"].items()}
assert tf_min["ge"] == min(tf_min.values()) < tf_min["program"]
assert rn_min["ge"] == rn_min["program"] > min(rn_min.values())
fig

# %% [markdown]
# On the transformer GE's adjustment gives the lowest minimum of all the orders (the
# "lowest minimum" line). On the ResNet it moves nodes too (its "GE's adjustment" line),
# but the minimum stays where it was: none of the moved outputs was alive at the peak
# step. There another order wins by far. The planner follows: its arena moves with the
# minimum. No order is best everywhere, which is why "best" tries them all.
#
# A schedule changes lives, never results: run the transformer with two plans of other
# orders and compare with the plain run, bit for bit:

# %%
tf = get_model("transformer").graph
feeds = mg.random_feeds(tf)
reference = mg.Executor(tf).run(feeds)
for order in ("ge", "memory"):
    plan = zoo["transformer"][order].plan
    got = mg.Executor(tf, plan).run(feeds)
    print(f"order {order}: same result bit for bit:",
          all(reference[k].tobytes() == got[k].tobytes() for k in reference))

# %% [markdown]
# ## Exercises
#
# **1.** For the CNN of the zoo (`get_model("cnn").graph`), which order of
# `mg.memory.ORDERS` (other than "best") gives the lowest theoretical minimum, in exact
# bytes (alignment 1) and without in-place? Put its name in `ANSWER_1`.

# %%
ANSWER_1 = None   # an order's name

# %%
check_answers({1: (ANSWER_1, l05b.exercise_1)})

# %% [markdown]
# ## Summary
#
# - The minimum belongs to a schedule. Left or right branch first is luck; GE's adjustment
#   moves a node to just before its first reader when its inputs live on anyway (fixed
#   rule: Variables and Consts; dynamic rule: L1 > L2), so the minimum never rises.
# - No order is best on every graph: try several and keep the lowest ("best").
# - Next: lesson 06 drops blocks altogether and places every tensor at any offset.

# %% [markdown]
# # 10 · Your own model: a PyTorch training step, imported and planned
#
# **This lesson needs PyTorch** (the CPU build is enough): `pip install 'minigraph[torch]'`.
#
# **Goal.** Every earlier lesson planned graphs built in minigraph. Here the model is
# written in plain PyTorch, the way you would write your own, and `from_torch` turns one
# training step of it (forward, backward, SGD update) into a minigraph graph. We look at
# what the import kept and what it lost, plan the step with every technique of lessons
# 03-06, run DTR's simulation on it (lesson 07), run the step in minigraph and compare the
# loss and gradients with PyTorch's, then do the same for a ResNet-18 [He 2016], a
# GPT-2-style block [Radford 2019] and nanoGPT [Karpathy 2022], written in PyTorch.
#
# **Sources.** PyTorch captures the step itself: AOTAutograd's joint graph [Ansel 2024] (the
# forward and the backward ATen ops that `torch.compile` would see, with shapes and
# dtypes). Each ATen op that minigraph has becomes that op, so the graph runs on NumPy and
# CuPy; any other becomes an *opaque* op that carries its shapes, bytes and FLOPs, enough
# to plan it and to simulate DTR [Kirisame 2021] on it, not to run it. The techniques are
# those of the MXNet note [Chen 2016] and the GE article [Huawei GE]. The code:
# `minigraph/fromtorch/` (the importer; `zoo.py` holds the PyTorch models used here).
# Lesson 10b imports real models at their real sizes, from shapes alone.

# %%
import sys
from pathlib import Path

try:
    import minigraph as mg
except ModuleNotFoundError:          # a clone without `pip install -e .`: use the repo
    sys.path.insert(0, str(Path.cwd().parent))
    import minigraph as mg

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from IPython.display import Markdown, display

from minigraph.experiments.techniques import compare_techniques, dtr_sweep, same_counting
from minigraph.fromtorch import compare, from_torch
from minigraph.fromtorch.architectures import architecture
from minigraph.fromtorch.zoo import torch_model
from minigraph.graph import fmt_bytes
from minigraph.lessons import check_answers, l10
from minigraph.tour import graph_summary, opaque_nodes
from minigraph.viz import memory_widget, plot_comparison, plot_dtr_sweep

print("torch", torch.__version__)


def show_table(header, rows):
    """Render rows (lists of cells) as a Markdown table under the cell."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    display(Markdown("\n".join(lines)))

# %% [markdown]
# ## 1. A model in PyTorch
#
# A small CNN, written as you would write it: two convolutions, batch norm, ReLU, max
# pooling and a linear classifier, trained with cross-entropy. A batch of eight 16x16
# images keeps every tensor small.

# %%
torch.manual_seed(0)


class SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(torch.flatten(x, 1))


net = SmallNet().train()
x = torch.randn(8, 3, 16, 16)
y = torch.randint(0, 10, (8,))
print(net)
print(f"{sum(p.numel() for p in net.parameters()):,} parameters, "
      f"{len(list(net.buffers()))} buffers (batch norm's running statistics)")

# %% [markdown]
# ## 2. Import one training step
#
# `from_torch(module, example_inputs, loss_fn, targets=...)` traces
# `loss_fn(module(*example_inputs), *targets)` and its backward with PyTorch's own graph
# capture, maps each ATen op, and appends one SGD update per parameter. What comes back
# behaves like a zoo `Model`: `model.graph`, `model.loss`, `model.params`, and
# `model.feeds(0)`, which holds the module's own weights and the example batch, so a step
# in minigraph is the step PyTorch would take.

# %%
model = from_torch(net, (x,), F.cross_entropy, targets=(y,), lr=0.1, name="small_net")
print(model.summary())

# %% [markdown]
# ## 3. What the import kept, and what it lost
#
# A training step in PyTorch is more than its ops. The report below says, for this model,
# what survived and what did not:
#
# * **views and aliasing**: a PyTorch view shares its base's storage; every minigraph
#   tensor owns its buffer, so a view becomes a copy (the report counts their bytes);
# * **in-place ATen ops**: PyTorch's functionalisation rewrites them as ops with fresh
#   outputs before the import; minigraph's planners then choose in-place on their own
#   (lesson 03);
# * **random ops** (dropout in training mode, `randn_like`, `bernoulli`): minigraph's
#   seeded random ops, whose draw is a pure function of a key and the step, so a node run
#   again (DTR) draws the same; `compare` (section 5) feeds PyTorch the same noise;
# * **composite ops** (hardswish, ELU, label smoothing, `F.normalize`, `F.interpolate`,
#   ...): traced with PyTorch's own decomposition table into Core ATen ops, except the
#   fused kernels minigraph keeps whole (layer norm, softmax, the losses);
# * **buffers** such as batch norm's running statistics: read as constants; their updates
#   are dropped (training-mode batch norm normalises with the batch's statistics, so the
#   loss and gradients are still PyTorch's).
#
# What the import cannot represent (data-dependent shapes, a non-scalar loss, ...) it
# refuses with a `TorchImportError` naming the op.

# %%
print(model.report)
opaque = opaque_nodes(model.graph)
print(f"\nopaque nodes (no minigraph kernel): {len(opaque)}")

# %% [markdown]
# ## 4. The graph
#
# The same summary as `minigraph tour`: nodes by role (forward, backward, update), tensors
# by kind, bytes of each kind. Then the ops, counted by name and role.

# %%
g = model.graph
print(graph_summary(g))
counts = {}
for n in g.nodes:
    counts[(n.op, n.role)] = counts.get((n.op, n.role), 0) + 1
show_table(["op", "role", "nodes"],
           [[op, role, k] for (op, role), k in sorted(counts.items(), key=lambda t: -t[1])])

# %% [markdown]
# ## 5. One step in minigraph against PyTorch
#
# When every op maps, the graph runs on NumPy like any zoo model: plan it, run one step,
# and compare. The loss is an output; each gradient is read back from the SGD update,
# `grad = (p - p_new) / lr`. PyTorch computes the same step on the same weights and batch.
# float32 sums in another order, so the two agree to a relative tolerance, not bit for
# bit.

# %%
if opaque:
    print(f"not run: {len(opaque)} opaque op(s), first {opaque[0]}; the plans below need "
          "no run")
else:
    feeds = model.feeds(0)
    plan = mg.plan_memory(g, mg.MemoryOptions(planner="refcount", inplace=True))
    out = mg.Executor(g, plan).run(feeds)
    net.zero_grad()
    loss_t = F.cross_entropy(net(x), y)
    loss_t.backward()
    torch_grads = {name.replace(".", "_"): p.grad.numpy() for name, p in net.named_parameters()}
    worst = 0.0
    for p in model.params:
        grad = (feeds[p] - out[f"{p}_new"]) / model.lr
        scale = max(1e-6, float(np.abs(torch_grads[p]).max()))
        worst = max(worst, float(np.abs(grad - torch_grads[p]).max()) / scale)
    loss_mg = float(out[model.loss])
    print(f"loss: minigraph {loss_mg:.6f}, PyTorch {loss_t.item():.6f}")
    print(f"gradients of {len(model.params)} parameters: largest difference "
          f"{worst:.1e} of the gradient's largest entry")
    assert abs(loss_mg - loss_t.item()) <= 1e-4 * abs(loss_t.item()) and worst < 1e-3

# %% [markdown]
# `compare` does that check for any imported step (it reads the gradients as outputs, not
# back from the update, and feeds PyTorch minigraph's noise where the model draws any). It
# also runs PyTorch's own step in float64, and says how far PyTorch's float32 gradients
# are from those: the size float32 rounding reaches on this model. On a small net that is
# about 1e-7. On a deep convolutional net it is not: every layer adds rounding, batch norm
# over a batch of 2 divides by small variances, and a ReLU near 0 flips its mask, so
# torchvision's ResNet-18 differs from its own float64 run by far more than any float32
# tolerance on some gradients (tests/test_fromtorch_unseen.py checks it). Then a float32
# difference cannot tell a wrong import from rounding; `compare(..., float64=True)`
# imports and runs both sides in float64, where an exact import agrees to ~1e-10: that
# re-run decides.

# %%
check = compare(model, net, (x,), F.cross_entropy, (y,))
print(check)
print(compare(model, net, (x,), F.cross_entropy, (y,), float64=True))

# %% [markdown]
# ## 6. Every technique on the imported step
#
# The same bars as lesson 00: one per planner of the registry, all with in-place, and one
# for DTR at 80% of the total peak. Nothing here needs a run, so opaque ops would not
# matter: the planners see only buffers and lifetimes. DTR holds the planned tensors and
# the running op's workspace in one budget, so with its bar every bar is **working
# memory**: a planner's arena plus the workspace the executor takes beside it (grey),
# against the **working minimum** (the bytes alive plus the running op's workspace, at
# the worst step), which only recomputation goes below. The last line is written from
# the numbers.

# %%
rows = compare_techniques(g, mg.MemoryOptions(inplace=True), slow=False, dtr_budget=0.8)
for row in rows:
    print(row)
dtr = rows[-1]
best = min((r for r in rows if r.family != "dynamic"), key=lambda r: r.working)
print(f"best planner: {best.label}, working memory {fmt_bytes(best.working)} (arena "
      f"{fmt_bytes(best.bytes)} + workspace {fmt_bytes(best.workspace)}); {dtr.label}: "
      f"{fmt_bytes(dtr.working)}, {dtr.status}; working minimum "
      f"{fmt_bytes(dtr.working_minimum)}: DTR is "
      f"{'below' if dtr.status == 'ok' and dtr.working < dtr.working_minimum else 'not below'}"
      f" it")
plot_comparison(rows, title=f"{model.name}: working memory per technique")

# %% [markdown]
# ## 7. DTR's simulation
#
# DTR runs the step op by op under a budget, evicting and recomputing (lesson 07). Its
# simulated mode needs each op's cost, which the import gives (FLOPs, also for opaque
# ops), so it runs on any imported graph. A budget ratio is a fraction of the total
# peak, parameters included, as in the DTR paper; the budget it gives is working memory.
# The sweep's ratios step evenly from the whole peak down to the smallest budget DTR can
# start in, so they are not round: the table prints them to a tenth of a percent, and
# the one near 80% is not section 6's 80% (its budget differs by as much as the ratios
# do; the line under the table prints both). Then the smallest budget at which DTR
# finishes, set against the floors in the same counting (written from the numbers).

# %%
sweep_rows = dtr_sweep(g)
show_table(["budget (of total peak)", "budget (working memory, bytes)", "status", "compute"],
           [[f"{r.ratio:.1%}", f"{r.budget:,}", r.status,
             "-" if r.overhead is None else f"x{r.overhead:.3f}"] for r in sweep_rows])
plot_dtr_sweep(sweep_rows)
near = min(sweep_rows, key=lambda r: abs(r.ratio - 0.8))
print(f"section 6's DTR at 80%: a budget of {dtr.bytes:,} B; the sweep's row nearest it, "
      f"at {near.ratio:.1%}: {near.budget:,} B")
c = same_counting(g)
print(f"theoretical minimum {fmt_bytes(c.theoretical_minimum)} (arena), working minimum "
      f"{fmt_bytes(c.working_minimum)}; best static plan {fmt_bytes(c.static_working)} of "
      f"working memory; DTR's smallest budget {fmt_bytes(c.dtr_budget)}, compute "
      f"x{c.dtr_overhead:.2f}: "
      + (f"below the working minimum by {fmt_bytes(c.working_minimum - c.dtr_budget)}"
         if c.below else "not below the working minimum"))

# %% [markdown]
# ## 8. Models as their users write them
#
# `minigraph.fromtorch.zoo` holds a ResNet-18 (basic blocks, batch norm, residual adds,
# adaptive average pooling; `width` and `image` scale it down) and one GPT-2 block (layer
# norm, causal self-attention written out, a GELU MLP; GPT-2 small is `d_model=768`,
# 12 heads). `minigraph.fromtorch.architectures` holds twelve more, each written the way
# its users write it; here nanoGPT's model [Karpathy 2022]: token and position embeddings
# (`torch.arange`), a causal mask kept as a `tril` buffer and applied with `masked_fill`,
# the exact (erf) GELU, and the output layer tied to the token embedding. Each comes as
# `(module, example_inputs, loss_fn, targets)`, small enough for a laptop;
# `benchmarks/from_torch.py` plans the real sizes and prints all twelve.

# %%
show, imported = [], {}
cases = [("resnet18", torch_model("resnet18", batch=2, image=32, width=8)),
         ("gpt_block", torch_model("gpt_block", batch=2, seq=16, d_model=64, heads=4)),
         ("nanogpt", architecture("nanogpt"))]
for name, case in cases:
    m = from_torch(case.module, case.example_inputs, case.loss_fn, targets=case.targets,
                   name=name)
    imported[name] = (case, m)
    r = {row.technique: row for row in compare_techniques(
        m.graph, mg.MemoryOptions(inplace=True), planners=["refcount", "ge", "bestfit"])}
    show.append([name, m.report.aten_nodes, len(m.graph), len(opaque_nodes(m.graph)),
                 f"{r['none'].bytes:,}", f"{r['refcount'].bytes:,}", f"{r['ge'].bytes:,}",
                 f"{r['bestfit'].bytes:,}", f"{r['bestfit'].theoretical_minimum:,}"])
show_table(["model", "ATen nodes", "nodes", "opaque", "no reuse", "refcount", "GE",
            "best-fit", "minimum"], show)

# %% [markdown]
# nanoGPT imports whole: its mask (`tril`, `== 0`, `masked_fill`), `arange`, the erf GELU
# and the tied weights all map, so the step runs here as in PyTorch. One step of it,
# against PyTorch's (the import of the table above, not a second one):

# %%
case, gpt = imported["nanogpt"]
print(gpt.report)
out = mg.Executor(gpt, mg.plan_memory(gpt, planner="bestfit", inplace=True)).run(gpt.feeds(0))
with torch.no_grad():
    loss_t = case.loss_fn(case.module(*case.example_inputs), *case.targets).item()
print(f"loss: minigraph {float(out[gpt.loss]):.6f}, PyTorch {loss_t:.6f}")
assert abs(float(out[gpt.loss]) - loss_t) <= 1e-4 * abs(loss_t)

# %% [markdown]
# ## 9. The widget
#
# `memory_widget` takes the imported model like any graph: every switch of lesson 00, on
# your own step.

# %%
w = memory_widget(model, planner="bestfit", inplace=True)
w

# %% [markdown]
# ## Exercises
#
# **1.** Write a PyTorch model of your own (at least two layers with weights and biases)
# whose import maps every op, so that it runs in minigraph. Set
# `ANSWER_1 = (module, example_inputs, loss_fn, targets)`. It passes when one minigraph
# step gives PyTorch's loss (within float32 tolerance). If an op goes opaque, the check
# names it: find a way to write the same thing with ops that map.
#
# **2.** DTR on the zoo's small GPT block (`l10.GPT_2`, imported by `l10.gpt_graph()`):
# which is the smallest budget of `l10.RATIOS_2` (fractions of the total peak) at which
# `simulate(graph, ratio=r)` finishes (neither `BudgetError` nor `ThrashError`)? Put it in
# `ANSWER_2`.

# %%
print("exercise 2's budgets:", l10.RATIOS_2, "- the block:", l10.GPT_2)

ANSWER_1 = None      # e.g. (my_net, (my_x,), F.mse_loss, (my_target,))
ANSWER_2 = None      # e.g. 0.9

# %%
check_answers({1: (ANSWER_1, l10.exercise_1), 2: (ANSWER_2, l10.exercise_2)})

# %% [markdown]
# ## Summary
#
# * `from_torch(module, example_inputs, loss_fn, targets=...)` captures a PyTorch
#   training step (forward and backward) and returns a minigraph model: ops minigraph has
#   run on NumPy and CuPy; the others are opaque, carrying shapes, bytes and FLOPs.
# * The import states what it kept and lost: buffers such as batch norm's running
#   statistics become constants, in-place ATen ops come back functional, and what it
#   cannot represent it refuses by name.
# * Planning needs no run: every static planner, the validator and DTR's simulation work
#   on any imported graph, opaque ops included; running the step needs every op mapped,
#   and then its loss and gradients match PyTorch's within float32 tolerance.
# * `minigraph tour --torch resnet18` prints the tour of an imported model;
#   `benchmarks/from_torch.py` sets the planned bytes of ResNet-18 and a GPT-2 small block
#   beside PyTorch's own measured peak on a GPU.

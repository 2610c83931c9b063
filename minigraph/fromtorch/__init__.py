"""Your own model: a PyTorch training step imported as a minigraph graph.

`from_torch(module, example_inputs, loss_fn, targets=...)` captures one training step,
`loss_fn(module(*example_inputs), *targets)`, with PyTorch's own graph capture: AOTAutograd's
joint forward + backward graph of ATen ops, functionalised, with every node's shape and dtype
[Ansel 2024]. Each ATen node becomes minigraph nodes (`aten.py`, `aten_more.py`): matrix
products, elementwise ops (with PyTorch's type promotion as casts), rounded division,
activations (ReLU, GELU in both forms, SiLU, ReLU6/hardtanh, leaky ReLU, tanh, sigmoid,
abs, clamp) and their backward, masks (comparisons, logical ops, `where`, `masked_fill`,
`tril`, `arange`), reductions (sum, mean, amax, var, logsumexp), views and their backward
(`select_backward`, `slice_backward`), convolutions 1-d and 2-d (grouped, depthwise,
dilated, transposed) and their backward, pooling, batch, layer and group norm, softmax,
the losses (cross-entropy and nll on [N, C] and [N, C, H, W], mse, smooth L1, BCE on
logits), embedding (with `padding_idx`), and the CPU's fused attention kernel, decomposed
into its products and softmax. Every rule declares the arguments it honours: a call that
sets any other argument away from its default is not mapped (`aten.unhonoured`). An ATen
op minigraph lacks becomes an `opaque` node (`minigraph.ops.opaque`) with PyTorch's output
shapes, dtypes, bytes and FLOPs (PyTorch's FLOP counter): every planner, the validator,
the online allocators and DTR's simulation work on the graph; running it raises
`OpaqueOpError` naming the node and the ATen op. SGD update nodes (`p_new = p - lr *
grad`) are appended, so the result is a model record like the zoo's: outputs `[loss,
*(p + "_new")]`. `minigraph.fromtorch.architectures` holds twelve common architectures
written as their users write them; each imports whole.

What the import keeps and loses (`model.report` says it for one model):

- Views and aliasing: lost. ATen views (view, t, permute, expand, slice, ...) become
  minigraph's copying ops, because every minigraph tensor owns its buffer; the report
  counts their bytes. A transpose feeding a matrix product becomes the product's flag
  (no copy). An opaque view op records which input it aliases (`view_of`).
- In-place ATen ops: functionalisation replaces them with out-of-place ops before the
  import (`h.relu_()` imports as relu); one that survives, or a step that writes into
  its inputs or parameters, is refused (`TorchImportError`). minigraph's planners then
  find their own in-place hand-overs.
- Composite ops: the step is traced with PyTorch's own decomposition table into Core ATen
  ops [PyTorch Core ATen] (`capture.decompositions`), except the ops minigraph maps whole:
  its fused kernels keep their workspace and saved statistics, ReLU/GELU/SiLU their
  in-place capability. A kept op whose rule refuses a call (cross-entropy with class
  weights, BCE with `pos_weight`) is decomposed instead, on a second capture.
  `minigraph.fromtorch.coverage` checks the Core ATen opset op by op.
- Random ops (train-mode dropout, rand, randn, their `_like` forms, bernoulli): seeded
  random ops (`minigraph.ops.random`), their draw a pure function of (seed, node key,
  step), so DTR's recomputation draws the same. `compare(model, module, ...)` checks a
  step against PyTorch's, feeding PyTorch the same noise, and says how far float32
  rounding reaches (a float64 re-run decides). Other random ops (randint, randperm,
  multinomial) are refused, saying to pass the draw as an input.
- Buffers (batch-norm running statistics, attention masks): read as constants; their
  updates are dropped (train-mode batch norm normalises with the batch statistics, so the
  step's loss and gradients are PyTorch's; only the running averages are not advanced).
  Eval-mode batch norm becomes elementwise ops on the running statistics. Parameters
  without a gradient (`requires_grad=False`) become constants, and so do tensors made
  inside the step (class weights of a loss). Tied weights (one tensor under two names, as
  GPT ties its embedding and output layer) are one parameter, its gradients summed.
- Numbers that differ from PyTorch's only by rounding: max-pool gradients of tied maxima
  are shared equally (PyTorch gives them to the first), nll-loss's own gradient is the
  cross-entropy one (equal after the log-softmax backward that reads it).
- Refused with a typed error naming the node: data-dependent shapes and control flow
  (PyTorch cannot capture them statically), non-ATen calls, dtypes NumPy lacks (bfloat16,
  complex), a non-scalar loss. Naming the layer or tensor: batch norm with
  `momentum=None` (its cumulative average reads a Python number), `nn.Embedding(sparse=
  True)`, a tensor the step reads that is neither an input, a parameter nor a registered
  buffer (a closure of `loss_fn`, a plain tensor attribute: pass it as `targets=` or
  `register_buffer` it), a parameter named like a tensor the import makes (`w_new` beside
  `w`, `tanh_0`). Labels of the example batch equal to `ignore_index` make the loss opaque
  (PyTorch drops them; minigraph's cross-entropy drops none), and the report says so.
- Parameters the loss does not use (a second head) are frozen for the import and the
  report says so (PyTorch's capture refuses a parameter without a gradient).
- `nn.LSTM`: on the CPU PyTorch runs it as one oneDNN kernel (`mkldnn_rnn_layer`) whose
  backward gives both bias vectors a single gradient node, which AOTAutograd's signature
  cannot map back to two parameters (its capture fails). The capture turns oneDNN off, so
  the LSTM traces as its matrix products and gates, which map. Two parameters whose
  gradients are one node for another reason (`x * (a + b)`) are captured again, each read
  through a view of its own.

PyTorch is optional: `pip install 'minigraph[torch]'`; without it `from_torch` raises
`TorchMissingError`, and `import minigraph` never imports torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ops.opaque import OpaqueOpError
from .aten import RULES
from .capture import (
    MetaModelError,
    TorchImportError,
    TorchMissingError,
    as_tuple,
    capture,
    decompositions,
    require_torch,
)
from .compare import StepCheck, compare
from .importer import ImportReport, TorchModel, convert, convert_inference, make_batch_fn

__all__ = ["ImportReport", "MetaModelError", "OpaqueOpError", "StepCheck", "TorchImportError",
           "TorchMissingError", "TorchModel", "compare", "from_torch", "report"]


def from_torch(module: Any, example_inputs: Any, loss_fn: Callable[..., Any] | None, *,
               targets: Any = (), lr: float = 0.1, name: str | None = None) -> TorchModel:
    """Import one SGD training step of a PyTorch `module` as a minigraph model.

    `loss_fn=None` imports inference instead (GE's setting): the forward pass alone, in
    eval mode (the module's mode is restored after), outputs the module's outputs, no
    backward, no update; `model.loss` names the first output and `model.params` is empty
    (the weights are still the graph's parameters, fed as in training).

    A module and inputs on PyTorch's `meta` device import from shapes alone: nothing is
    allocated and no kernel runs; the graph plans and simulates to exactly the bytes of the
    real import, and running it raises `MetaModelError` (a meta model has no values).

    The step is `loss = loss_fn(module(*example_inputs), *targets)`, then the gradients of
    every trainable parameter, then `p_new = p - lr * grad`. Graph inputs are named "x"
    ("x0", "x1", ... for several) and "y" (or "y0", ...); parameters keep the module's
    names with "." as "_". `model.feeds(0)` is the example batch and the module's weights,
    so one run is PyTorch's step. `model.report` says what was kept and lost.
    """
    torch = require_torch()
    inputs = as_tuple(example_inputs, "example_inputs")
    targs = () if isinstance(targets, tuple) and not targets else as_tuple(targets, "targets")
    if not isinstance(lr, (int, float)) or isinstance(lr, bool):
        raise TorchImportError(f"from_torch: lr must be a number, not {lr!r}")
    label = name or f"torch_{type(module).__name__.lower()}"
    if loss_fn is None:
        return _inference(torch, module, inputs, targs, label)
    cap, first = _captured(torch, module, inputs, loss_fn, targs, label, float(lr))
    make_batch = make_batch_fn(cap)

    def at(lr: float) -> TorchModel:
        done = first.pop(float(lr), None)          # the capture's own conversion, once
        graph, loss, params, rep = done or convert(cap, torch, float(lr), label,
                                                   type(module).__name__)
        desc = (f"PyTorch {type(module).__name__} imported"
                + ("" if rep.runs else f", {len(rep.opaque)} opaque nodes (plans, does not run)"))
        return TorchModel(label, graph, loss, params, float(lr), make_batch, desc,
                          {"lr": float(lr), "import_report": rep}, at, rep)
    return at(lr)


def _captured(torch: Any, module: Any, inputs: tuple, loss_fn: Callable[..., Any],
              targets: tuple, label: str, lr: float) -> tuple[Any, dict]:
    """The step captured with PyTorch's decompositions, except for the ops minigraph maps
    whole (its fused kernels); an op kept whole whose rule then refuses a call (BCE with
    `pos_weight`, `nll_loss` with a weight) is decomposed instead on a second capture.
    Returns the capture and {lr: its conversion at lr}."""
    keep = set(RULES)
    table = {op.name().split("::")[-1].split(".")[0]
             for op in decompositions(torch, lambda op: False)}
    traced = 0.0
    for _ in range(3):
        cap = capture(module, inputs, loss_fn, targets, keep=keep.__contains__)
        done = convert(cap, torch, lr, label, type(module).__name__)
        traced += cap.seconds
        redo = {aten.split(".")[1] for _, aten, _ in done[3].opaque} & keep & table
        if not redo:
            break
        keep -= redo
    done[3].seconds["trace"] = traced           # every capture's trace
    return cap, {lr: done}


def _inference(torch: Any, module: Any, inputs: tuple, targets: tuple,
               label: str) -> TorchModel:
    """`from_torch(..., loss_fn=None)`: the forward pass in eval mode, imported."""
    if targets:
        raise TorchImportError("from_torch: targets are read by loss_fn; with loss_fn=None "
                               "(inference) pass none")
    if not isinstance(module, torch.nn.Module):
        raise TorchImportError(f"from_torch: module must be a torch.nn.Module, not "
                               f"{type(module).__name__}")
    modes = {m: m.training for m in module.modules()}
    module.eval()
    try:
        keep = set(RULES)
        table = {op.name().split("::")[-1].split(".")[0]
                 for op in decompositions(torch, lambda op: False)}
        traced = 0.0
        for _ in range(3):      # as _captured: an op kept whole that its rule refuses
            cap = capture(module, inputs, None, (), keep=keep.__contains__)
            graph, out, _, rep = convert_inference(cap, torch, 0.0, label,
                                                   type(module).__name__)
            traced += cap.seconds
            redo = {aten.split(".")[1] for _, aten, _ in rep.opaque} & keep & table
            if not redo:
                break
            keep -= redo
        rep.seconds["trace"] = traced
    finally:
        for m, mode in modes.items():
            m.train(mode)
    desc = f"PyTorch {type(module).__name__} imported for inference (forward only)"
    model = TorchModel(label, graph, out, (), 0.0, make_batch_fn(cap), desc,
                       {"mode": "inference", "import_report": rep}, None, rep)
    model.rebuild = lambda lr: model
    return model


def report(model: TorchModel) -> ImportReport:
    """What the import of `model` kept and lost (also `model.report`)."""
    if not isinstance(model, TorchModel) or model.report is None:
        raise TorchImportError(f"report: {model!r} is not a model from from_torch")
    return model.report

"""Capture a PyTorch training step: AOTAutograd's joint forward + backward graph [Ansel 2024].

`aot_export_module(..., trace_joint=True)` traces `loss_fn(module(*inputs), *targets)` with
fake tensors, functionalises it (in-place ops and buffer updates become new values) and
appends the backward pass, all as core-ish ATen ops in one FX graph whose nodes carry
their shapes and dtypes (`meta["val"]`). The module's weights and the batch are handed
to it as fake tensors too (`_faked`): no kernel runs during the capture, whatever the
model's size; the real values are read afterwards, once. PyTorch is imported here, inside
functions only: `import minigraph` never imports it.
"""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..errors import MinigraphError
from ..ops.registry import OPS


class TorchImportError(MinigraphError, ValueError):
    """The training step cannot be imported as a minigraph graph; names the node and why."""


class TorchMissingError(TorchImportError, ImportError):
    """PyTorch is not installed (it is the optional extra `minigraph[torch]`)."""


class MetaModelError(MinigraphError):
    """A model imported from PyTorch's `meta` device has shapes and dtypes, no values: it
    plans and simulates, it does not run."""


class MetaValue:
    """The value of a tensor of a meta-device import: its shape and dtype only. Reading it
    as an array (an executor uploading a constant, `init_params`) raises MetaModelError."""

    def __init__(self, name: str, shape: tuple[int, ...], dtype: str) -> None:
        self.name, self.shape, self.dtype = name, tuple(shape), dtype

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise MetaModelError(f"{self.name} comes from a model on PyTorch's meta device: it has "
                             "a shape and a dtype but no values, so the graph plans and "
                             "simulates but cannot run; import the module with real weights "
                             "to run it")

    def __repr__(self) -> str:
        return f"<no value: {self.name} {list(self.shape)} {self.dtype}>"


def require_torch() -> Any:
    """The `torch` module, or TorchMissingError saying how to install it."""
    try:
        import torch
    except ImportError as e:
        raise TorchMissingError("from_torch needs PyTorch, an optional extra: "
                                "pip install 'minigraph[torch]'") from e
    return torch


@dataclass
class Captured:
    """The joint graph and what its placeholders and outputs are."""
    gm: Any                      # torch.fx.GraphModule
    signature: Any               # AOTAutograd's GraphSignature
    values: dict[str, Any]       # placeholder name -> the real tensor (weights, buffers, batch)
    names: dict[str, str]        # placeholder name -> minigraph tensor name
    kinds: dict[str, str]        # placeholder name -> "param", "buffer" or "input"
    tied: dict[str, str] = field(default_factory=dict)  # placeholder -> the first one
                                                        # holding the same parameter
    unused: list[str] = field(default_factory=list)     # parameters the loss does not use,
                                                        # frozen for the trace
    seconds: float = 0.0         # wall-clock seconds of PyTorch's trace (aot_export_module)


def as_tuple(x: Any, what: str) -> tuple:
    torch = require_torch()
    if isinstance(x, torch.Tensor):
        return (x,)
    if isinstance(x, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in x):
        return tuple(x)
    raise TorchImportError(f"from_torch: {what} must be a torch.Tensor or a tuple of them, "
                           f"not {type(x).__name__}")


def _input_names(prefix: str, n: int) -> list[str]:
    return [prefix] if n == 1 else [f"{prefix}{k}" for k in range(n)]


def _refuse_layers(torch: Any, module: Any) -> None:
    """Layers whose training step cannot be captured, refused by name before tracing."""
    nn = torch.nn
    for path, m in module.named_modules():
        where = f"layer {path or '(the module)'} ({type(m).__name__})"
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.momentum is None and \
                m.training and m.track_running_stats:
            raise TorchImportError(
                f"{where} has momentum=None: its running statistics are a cumulative "
                "average whose factor 1/num_batches_tracked PyTorch reads as a Python number "
                "(a data-dependent value the capture cannot trace). Give it a momentum "
                "(0.1 is the default), or call .eval() on it")
        if isinstance(m, nn.Embedding) and m.sparse:
            raise TorchImportError(
                f"{where} has sparse=True: its gradient is a sparse tensor, which minigraph "
                "(dense buffers only) cannot hold; use nn.Embedding(..., sparse=False)")


def _plain_tensor_attributes(torch: Any, module: Any) -> list[str]:
    """`layer.attr` for every tensor stored on a module that is neither a parameter nor a
    registered buffer (PyTorch's capture cannot see those)."""
    found = []
    for path, m in module.named_modules():
        for attr, v in vars(m).items():
            if isinstance(v, torch.Tensor) and attr not in m._parameters and \
                    attr not in m._buffers:
                found.append(f"{path}.{attr}" if path else attr)
    return found


def _outside_tensor_error(torch: Any, module: Any, e: Exception) -> TorchImportError:
    plain = _plain_tensor_attributes(torch, module)
    name = type(module).__name__
    if plain:
        return TorchImportError(
            f"{name}.{plain[0]} is a plain tensor attribute, not a parameter or a registered "
            f"buffer, so PyTorch's capture cannot see it; in __init__ write "
            f"self.register_buffer('{plain[0].rpartition('.')[2]}', tensor) instead")
    sizes = re.findall(r"size=\(([^)]*)\)", str(e))     # the last one is the real tensor's
    what = f" (shape [{sizes[-1].rstrip(',')}])" if sizes else ""
    return TorchImportError(
        f"the step reads a tensor{what} that is neither an input, a parameter nor a buffer "
        f"of {name}: loss_fn (or forward) closes over it or reads a global. Pass it with "
        "targets=(...) so that it becomes an input of the step, or register_buffer it on "
        "the module")


def _unused_parameters(step: Any, args: tuple, aot_export_module: Any) -> list[str]:
    """Names (as the step has them) of the parameters the loss does not depend on, from the
    forward graph alone (fake tensors: nothing runs)."""
    gm, sig = aot_export_module(step, args, trace_joint=False)
    seen, stack = set(), [n for n in gm.graph.nodes if n.name == sig.user_outputs[0]]
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(n.all_input_nodes)
    return sorted({full for ph, full in sig.inputs_to_parameters.items()
                   if ph not in {n.name for n in seen}})


def decompositions(torch: Any, keep: Any) -> dict:
    """PyTorch's own table of decompositions into the Core ATen opset [PyTorch Core ATen],
    less the ops `keep(short name)` says the import maps whole.

    Composite ops (hardswish, elu, huber, label smoothing, BCE, kl_div, normalize, cosine
    similarity, interpolate, ...) then arrive as the Core ATen ops they are made of, each
    written once, by PyTorch. An op kept whole keeps what a lesson needs of it: the fused
    kernels of layer norm, batch norm, softmax and the losses keep their workspace and
    their small saved statistics (decomposed, their backward would be a dozen elementwise
    nodes, each with its own buffer), and ReLU, GELU and SiLU keep the in-place capability
    of their minigraph op."""
    from torch._decomp import core_aten_decompositions
    return {op: fn for op, fn in core_aten_decompositions().items()
            if not keep(op.name().split("::")[-1].split(".")[0])}


@contextmanager
def _no_stack_traces(torch: Any) -> Iterator[None]:
    """FX records no Python stack trace per node while tracing (`node.meta["stack_trace"]`,
    which the import never reads; extracting one is about a twentieth of the trace)."""
    config = torch.fx.config
    before = getattr(config, "do_not_emit_stack_traces", None)
    config.do_not_emit_stack_traces = True
    try:
        yield
    finally:
        if before is None:
            del config.do_not_emit_stack_traces
        else:
            config.do_not_emit_stack_traces = before


def _trace(torch: Any, step: Any, args: tuple, keep: Any,
           joint: bool = True) -> tuple[Any, Any, list[str]]:
    """aot_export_module's joint graph; a parameter the loss does not use is frozen for the
    trace (PyTorch refuses a parameter without a gradient). Returns the unused names too.
    oneDNN is off while tracing: with it, `nn.LSTM` becomes one fused kernel
    (`mkldnn_rnn_layer`) that gives both bias vectors one gradient node, which AOTAutograd's
    signature cannot hold; without it the LSTM traces as its matrix products and gates."""
    from torch._functorch.aot_autograd import aot_export_module

    def export():
        with warnings.catch_warnings(), _no_stack_traces(torch):
            warnings.simplefilter("ignore")
            with torch.backends.mkldnn.flags(enabled=False):
                if not joint:                  # inference: the forward graph alone
                    with torch.no_grad():
                        return aot_export_module(step, args, trace_joint=False,
                                                 decompositions=table)
                return aot_export_module(step, args, trace_joint=True, output_loss_index=0,
                                         decompositions=table)
    table = decompositions(torch, keep)
    if not joint:
        return (*export(), [])
    try:
        return (*export(), [])
    except AssertionError as e:
        if "did not receive a gradient" not in str(e):
            raise
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        unused = _unused_parameters(step, args, aot_export_module)
    named = dict(step.named_parameters())
    frozen = [named[u] for u in unused if named[u].requires_grad]
    for p in frozen:
        p.requires_grad_(False)
    try:
        return (*export(), unused)
    finally:
        for p in frozen:
            p.requires_grad_(True)


def capture(module: Any, inputs: Sequence[Any], loss_fn: Callable[..., Any] | None,
            targets: Sequence[Any], keep: Callable[[str], bool] = lambda op: False) -> Captured:
    """Trace one training step of `module` into AOTAutograd's joint graph, composite ops
    decomposed by PyTorch's table except those `keep` names (see `decompositions`).
    `loss_fn=None`: the forward pass alone (inference), its outputs the module's."""
    torch = require_torch()
    if not isinstance(module, torch.nn.Module):
        raise TorchImportError(f"from_torch: module must be a torch.nn.Module, not "
                               f"{type(module).__name__}")
    _refuse_layers(torch, module)
    k = len(inputs)

    class _Step(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = module
            self.views = False
            self.mode = restore[0][2]

        def forward(self, *args):
            # Strict while the user's code runs: a real tensor it reads (a closure, a plain
            # attribute) is an error. Lenient after: AOTAutograd's second trace reads the
            # real constants its first trace kept (an `arange`, a decomposition's 0.0).
            self.mode.allow_non_fake_inputs = False
            try:
                if self.views:      # each parameter through a view of its own (see below)
                    ps = {n: p.view_as(p) for n, p in self.m.named_parameters()}
                    out = torch.func.functional_call(self.m, ps, args[:k])
                else:
                    out = self.m(*args[:k])
                if loss_fn is None:
                    return tuple(torch.utils._pytree.tree_leaves(out))
                return (loss_fn(out, *args[k:]),)
            finally:
                self.mode.allow_non_fake_inputs = True

    args = tuple(inputs) + tuple(targets)
    meta = any(t.is_meta for t in (*args, *module.parameters(), *module.buffers()))
    restore = _faked(torch, module, meta)
    step = _Step()
    traced = tuple(_fake_like(torch, restore, t, meta) for t in args)
    start = time.perf_counter()
    try:
        try:
            gm, sig, unused = _trace(torch, step, traced, keep, loss_fn is not None)
        except AssertionError as e:
            # Two parameters whose gradients are one node (`x * (a + b)`): AOTAutograd's
            # signature maps gradient names to parameters and loses one. Reading each
            # parameter through its own view gives each gradient a node of its own.
            if "gradients_to_parameters" not in str(e):
                raise
            step.views = True
            gm, sig, unused = _trace(torch, step, traced, keep)
    except TorchImportError:
        raise
    except Exception as e:
        if meta and "meta" in str(e).lower():
            first = str(e).strip().splitlines()[0][:200]
            raise TorchImportError(
                f"{type(module).__name__} cannot be traced from shapes alone (on PyTorch's "
                f"meta device; inputs of shape {_shapes(inputs)}): {type(e).__name__}: "
                f"{first}") from e
        if "convert all Tensors to FakeTensors" in str(e) and not meta:
            raise _outside_tensor_error(torch, module, e) from e
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        what = "forward pass" if loss_fn is None else "training step"
        raise TorchImportError(
            f"PyTorch could not capture the {what} of {type(module).__name__} "
            f"on inputs of shape {_shapes(inputs)} "
            f"({type(e).__name__}: {first[:300]}). Check that the step runs in PyTorch; "
            "data-dependent control flow or shapes, a loss that is not a scalar, or an op "
            "PyTorch cannot trace cannot be imported") from e
    finally:
        _restore(restore)
    seconds = time.perf_counter() - start
    if sig.user_inputs_to_mutate or getattr(sig, "parameters_to_mutate", None):
        raise TorchImportError(f"{type(module).__name__} writes in place into its inputs or "
                               "parameters during the step; the import cannot keep that")
    # Tied weights (one tensor under two names) come as one placeholder per name.
    named = {**dict(step.named_parameters(remove_duplicate=False)),
             **dict(step.named_buffers(remove_duplicate=False))}
    values, names, kinds, tied, first = {}, {}, {}, {}, {}
    for ph, full in {**sig.inputs_to_parameters, **sig.inputs_to_buffers}.items():
        if full not in named:
            raise TorchImportError(f"PyTorch's graph reads {full!r}, which {type(module).__name__} "
                                   "does not list among its parameters and buffers")
        tied_to = first.setdefault(id(named[full]), ph)
        if tied_to != ph:
            tied[ph] = tied_to
        values[ph] = _shape_only(named[full].detach()) if meta else named[full].detach()
        names[ph] = _name(full)
        kinds[ph] = "param" if ph in sig.inputs_to_parameters else "buffer"
    user = _input_names("x", k) + _input_names("y", len(targets))
    for ph, name, value in zip(sig.user_inputs, user, args):
        values[ph] = _shape_only(value.detach()) if meta else value.detach()
        names[ph], kinds[ph] = name, "input"
    clash = {v for v in names.values() if list(names.values()).count(v) > 1}
    if clash:
        raise TorchImportError(f"two tensors of {type(module).__name__} would both be named "
                               f"{sorted(clash)[0]!r} in minigraph; rename one")
    _check_generated_names(type(module).__name__, names, kinds)
    return Captured(gm, sig, values, names, kinds, tied, [_name(u) for u in unused], seconds)


def _shapes(inputs: Sequence[Any]) -> str:
    """`2x3x8, 2` for the shapes of the step's inputs, as an error names them."""
    return ", ".join("x".join(map(str, t.shape)) or "scalar" for t in inputs)


def _shape_only(t: Any) -> Any:
    """A meta tensor of `t`'s shape and dtype (no values read, none allocated)."""
    return t if t.is_meta else t.to("meta")


def _fake_like(torch: Any, restore: list, t: Any, meta: bool) -> Any:
    """`t` as a fake tensor of the mode `_faked` made: its shape, dtype and strides (a
    meta tensor: a fake CPU tensor of its shape and dtype)."""
    mode = restore[0][2]
    if not meta:
        return mode.from_tensor(t)
    with mode:
        return torch.empty(tuple(t.shape), dtype=t.dtype, device="cpu")


def _fake_mode(torch: Any) -> Any:
    from torch._subclasses.fake_tensor import FakeTensorMode
    return FakeTensorMode(allow_non_fake_inputs=True)      # strict in `_Step.forward`


def _faked(torch: Any, module: Any, meta: bool) -> list:
    """Swap every parameter and buffer of `module` for a fake tensor of one FakeTensorMode
    for the trace [Ansel 2024]; `_restore` puts the real ones back after. Returns what it
    puts back (the first entry carries the mode).

    Why fake even for real weights: `aot_export_module(trace_joint=True)` traces the step
    once on fake tensors, then traces that joint graph again (`make_fx`) on the tensors it
    was given. Given real weights, the second trace runs every forward and backward kernel
    for real (GPT-2 small's 124M parameters, with oneDNN off: seconds of convolution and
    matrix products on a CPU) to record shapes it already has. Given fake ones, both traces
    run no kernel. A fake tensor from `from_tensor` keeps the real one's shape, dtype,
    strides and `requires_grad`, so the graph is the same node for node.

    A module on PyTorch's meta device gets fake CPU tensors of its shapes instead:
    AOTAutograd's joint trace does not take meta parameters (it loses their gradients)."""
    mode = _fake_mode(torch)
    swapped, done = [], {}
    for m in module.modules():
        for table in (m._parameters, m._buffers):
            for k, v in list(table.items()):
                if v is None:
                    continue
                if id(v) not in done:          # a tied weight stays one tensor
                    if not meta:
                        f = mode.from_tensor(v)        # a Parameter stays one
                    else:
                        with mode:
                            f = torch.empty(tuple(v.shape), dtype=v.dtype, device="cpu")
                        if isinstance(v, torch.nn.Parameter):
                            f = torch.nn.Parameter(f, requires_grad=v.requires_grad)
                    done[id(v)] = f
                swapped.append((table, k, mode, v))
                table[k] = done[id(v)]
    if not swapped:
        swapped.append(({}, None, mode, None))
    return swapped


def _restore(swapped: list) -> None:
    for table, k, _, v in reversed(swapped):
        if k is not None:
            table[k] = v


def _name(full: str) -> str:
    """A parameter's or buffer's minigraph name: `m.block.0.weight` -> `block_0_weight`."""
    return full.removeprefix("m.").replace(".", "_")


def _check_generated_names(module: str, names: dict[str, str], kinds: dict[str, str]) -> None:
    """Refuse a parameter or buffer named like a tensor the import makes: `w_new` beside a
    parameter `w` (its SGD update), or `tanh_0` (the first tanh node's output)."""
    params = {names[ph] for ph, kind in kinds.items() if kind == "param"}
    for ph, name in names.items():
        base = name.removesuffix("_new")
        if name.endswith("_new") and base in params:
            raise TorchImportError(
                f"{module}: {kinds[ph]} {name!r} has the name minigraph gives the updated "
                f"value of parameter {base!r} (p_new = p - lr * grad); rename one of them")
        m = re.fullmatch(r"(.+)_(\d+)", name)
        if m and (m.group(1) in OPS or m.group(1) == "const" or m.group(1).startswith("aten_")):
            raise TorchImportError(
                f"{module}: {kinds[ph]} {name!r} is named like the output of a node the "
                f"import makes (node {m.group(2)} of op {m.group(1)!r}); rename it")

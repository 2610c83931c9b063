"""The joint graph, node by node, into minigraph nodes; then the SGD update; then a model record.

A node the loss depends on is a forward node, every other kept node a backward node (the
joint graph does not mark them). Only nodes the loss and the parameters' gradients depend
on are kept: the new running statistics of batch norm are computed by PyTorch's graph and
dropped here. Each node goes through its rule in `aten.py`; without one (or when the rule
refuses this call) it becomes an `opaque` node with PyTorch's shapes, dtypes and FLOPs.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import ops
from ..autodiff import sgd_updates
from ..errors import MinigraphError
from ..graph import Graph, Tensor, constant, fmt_bytes, input, name_scope, node_role, param
from ..models import Model
from ..ops.opaque import opaque
from . import aten_more  # noqa: F401  (registers the rules of aten_more.py)
from .aten import RULES, Dropped, PoolIndices, Unmapped, is_view, unhonoured
from .aten_core import SEEDED  # (importing it registers the rules of aten_core.py)
from .capture import Captured, MetaModelError, MetaValue, TorchImportError

_FLOATS = ("float16", "float32", "float64")
_META_KEEP = 1 << 20      # a meta import keeps the values of constants below 1 MiB only
_COPIES = ("reshape", "transpose", "broadcast_to", "getitem")   # what ATen views become
_RANDOM = {"native_dropout", "dropout", "bernoulli", "rand", "randn", "rand_like", "randn_like",
           "randint", "randint_like", "randperm", "uniform", "normal", "multinomial",
           "exponential", "geometric", "cauchy", "log_normal"}


@dataclass
class ImportReport:
    """What `from_torch` kept and what it lost, for one imported training step."""
    module: str
    aten_nodes: int = 0
    mapped: dict[str, int] = field(default_factory=dict)
    opaque: list[tuple[str, str, str]] = field(default_factory=list)  # node, ATen op, why
    view_copies: tuple[int, int] = (0, 0)       # views that became copies: count, bytes
    constants: list[str] = field(default_factory=list)   # buffers kept as constants
    dropped: list[str] = field(default_factory=list)     # buffer updates not kept
    frozen: list[str] = field(default_factory=list)      # parameters without a gradient
    torch_flops: int = 0                                 # PyTorch's FLOP counter, all nodes
    graph_flops: int = 0                                 # minigraph's count, update included
    notes: list[str] = field(default_factory=list)
    # Wall-clock seconds of the import's parts: "trace" (PyTorch's, every capture summed),
    # "weights" (parameters, buffers and batch read into NumPy), "nodes" (the ATen nodes
    # converted, shapes inferred), "graph" (the update nodes, the Graph frozen and checked).
    seconds: dict[str, float] = field(default_factory=dict, compare=False, repr=False)

    @property
    def runs(self) -> bool:
        """True when every node has a kernel: the graph runs on NumPy and CuPy."""
        return not self.opaque

    def kept(self) -> list[str]:
        n_map = sum(self.mapped.values())
        lines = [f"{n_map} of {self.aten_nodes} ATen nodes mapped to minigraph ops "
                 f"({len(self.mapped)} kinds)",
                 "the forward and backward of PyTorch's own joint graph (AOTAutograd), "
                 "with its shapes and dtypes; the module's weights and the example batch "
                 "as feeds; SGD update nodes appended (p_new = p - lr * grad)"]
        if self.torch_flops:
            lines.append(f"FLOPs: PyTorch's counter gives {self.torch_flops:,} (matrix "
                         f"products and convolutions only), minigraph {self.graph_flops:,} "
                         "(every node)")
        if self.constants:
            lines.append(f"buffers read as constants: {', '.join(self.constants)}")
        if self.opaque:
            lines.append(f"{len(self.opaque)} opaque nodes with PyTorch's shapes, bytes and "
                         "FLOPs: every planner and DTR's simulation work; running raises")
        return lines + self.notes

    def lost(self) -> list[str]:
        n, b = self.view_copies
        lines = [f"aliasing: {n} ATen views became copies ({fmt_bytes(b)} more than "
                 "PyTorch holds for them); in-place ATen ops: none, PyTorch's "
                 "functionalisation removed them"]
        if self.dropped:
            shown = ", ".join(self.dropped[:4]) + (", ..." if len(self.dropped) > 4 else "")
            lines.append(f"{len(self.dropped)} buffer updates dropped (the step does not "
                         f"write them): {shown}")
        if self.frozen:
            lines.append(f"parameters without a gradient, kept as constants: "
                         f"{', '.join(self.frozen)}")
        for node, aten, why in self.opaque:
            lines.append(f"opaque {node} ({aten}): {why}")
        return lines

    def __str__(self) -> str:
        head = f"from_torch({self.module}): " + ("runs in minigraph" if self.runs else
                                                 "plans and simulates, does not run")
        return "\n".join([head, "kept:", *(f"  {s}" for s in self.kept()), "lost:",
                          *(f"  {s}" for s in self.lost())])


def _np_dtype(torch_dtype: Any, where: str) -> str:
    name = str(torch_dtype).removeprefix("torch.")
    try:
        np.dtype(name)
    except TypeError:
        raise TorchImportError(f"{where}: dtype {name} has no NumPy equivalent (minigraph "
                               "runs NumPy/CuPy kernels); use float32") from None
    if np.dtype(name).kind not in "biuf":
        raise TorchImportError(f"{where}: dtype {name} is not supported")
    return name


def _spec(val: Any, where: str) -> tuple[tuple[int, ...], str] | None:
    if val is None:
        return None
    if not hasattr(val, "shape") or not hasattr(val, "dtype"):
        raise TorchImportError(f"{where}: an output that is not a tensor ({val!r}); "
                               "a Python number or a symbolic size cannot be imported")
    layout = str(getattr(val, "layout", "torch.strided"))
    if layout != "torch.strided":
        raise TorchImportError(f"{where}: a {layout.removeprefix('torch.')} tensor (a sparse "
                               "gradient: nn.Embedding(sparse=True) makes one); minigraph "
                               "holds dense tensors only: use sparse=False")
    dims = []
    for d in val.shape:
        if type(d) is not int:
            raise TorchImportError(f"{where}: shape {list(val.shape)} depends on the data "
                                   "(a symbolic size); minigraph needs static shapes")
        dims.append(d)
    return tuple(dims), _np_dtype(val.dtype, where)


class Converter:
    """Walks the joint graph once, filling `env` (FX node -> minigraph value)."""

    def __init__(self, cap: Captured, torch: Any, report: ImportReport):
        self.cap, self.torch, self.report = cap, torch, report
        self.env: dict[Any, Any] = {}
        self.views: list[Tensor] = []
        self._count: dict[str, int] = {}
        self.examples: dict[str, np.ndarray] = {}   # input name -> the example batch's value
        self.stash: dict[int, Any] = {}   # id(tensor) -> what a later rule reads beside it
        self.meta = any(v.is_meta for v in cap.values.values())   # an import from shapes

    # What rules read ---------------------------------------------------------------------
    def short(self, n: Any) -> str:
        return str(n.target).split(".")[1] if str(n.target).startswith("aten.") else \
            str(n.target)

    def _value(self, a: Any, n: Any) -> Any:
        fx = self.torch.fx
        if isinstance(a, fx.Node):
            v = self.env[a]
            if isinstance(v, Dropped):
                raise TorchImportError(f"node {n.name} ({n.target}) reads {v.what}, which "
                                       "the import drops")
            return v
        if isinstance(a, (list, tuple)):
            return type(a)(self._value(x, n) for x in a)
        return a

    def _flat(self, args: Any) -> list:
        out = []
        for a in args:
            if isinstance(a, (list, tuple)):
                out.extend(self._flat(a))
            elif isinstance(a, self.torch.fx.Node):
                out.append(self.env.get(a))
        return out

    def arg(self, n: Any, k: int, default: Any = None) -> Any:
        if k < len(n.args):
            return self._value(n.args[k], n)
        schema = getattr(n.target, "_schema", None)
        if schema is not None and k < len(schema.arguments):
            name = schema.arguments[k].name
            if name in n.kwargs:
                return self._value(n.kwargs[name], n)
        return default

    def kwarg(self, n: Any, name: str, default: Any = None) -> Any:
        return self._value(n.kwargs[name], n) if name in n.kwargs else default

    def named(self, n: Any, name: str, default: Any = None) -> Any:
        """The argument `name` of ATen's schema, wherever the call put it (or `default`)."""
        names = [a.name for a in n.target._schema.arguments]
        return self.arg(n, names.index(name), default) if name in names else default

    def example(self, t: Tensor) -> np.ndarray | None:
        """The value `t` has in the example step: a constant's, or an input's example batch
        (labels, say); None for anything computed, and for a meta-device import's."""
        v = t.value if t.kind == "const" else self.examples.get(t.name)
        return None if isinstance(v, MetaValue) else v

    def specs(self, n: Any) -> list:
        val = n.meta.get("val")
        if isinstance(val, (list, tuple)):
            return [_spec(v, f"node {n.name} ({n.target})") for v in val]
        return [_spec(val, f"node {n.name} ({n.target})")]

    def spec(self, n: Any) -> tuple[tuple[int, ...], str]:
        return self.specs(n)[0]

    # The walk ----------------------------------------------------------------------------
    def leaves(self, frozen: set[str]) -> None:
        cap = self.cap
        by_name = {n.name: n for n in cap.gm.graph.nodes}
        for n in cap.gm.graph.nodes:
            if n.op == "get_attr":          # a tensor made inside the step (class weights)
                self.env[n] = self._lifted(n)
                continue
            if n.op != "placeholder":
                continue
            if n.name in cap.tied:          # a tied weight: the same minigraph parameter
                self.env[n] = self.env[by_name[cap.tied[n.name]]]
                continue
            name, value, kind = cap.names[n.name], cap.values[n.name], cap.kinds[n.name]
            dtype = _np_dtype(value.dtype, name)
            shape = tuple(value.shape)
            arr = None if value.is_meta else value.cpu().numpy()
            if kind == "input":
                self.env[n] = input(name, shape, dtype)
                if arr is not None:
                    self.examples[name] = arr
            elif kind == "param" and name not in frozen:
                if dtype not in _FLOATS:
                    raise TorchImportError(f"parameter {name} has dtype {dtype}; only "
                                           "floating parameters train")
                if arr is None:                 # a meta weight: init reads raise
                    self.env[n] = t = param(name, shape, init="zeros", dtype=dtype)
                    t.init = (MetaValue(name, shape, dtype), None)
                else:
                    self.env[n] = param(name, shape, init=arr.copy(), dtype=dtype)
            else:
                self.env[n] = valueless(shape, dtype, name) if arr is None else \
                    constant(arr.copy(), name=name, dtype=dtype)

    def _lifted(self, n: Any) -> Tensor:
        value: Any = self.cap.gm
        for part in str(n.target).split("."):
            value = getattr(value, part)
        if not isinstance(value, self.torch.Tensor):
            raise TorchImportError(f"node {n.name} reads {n.target}, a "
                                   f"{type(value).__name__}, not a tensor")
        name = str(n.target).strip("_").replace(".", "_")
        if value.is_meta:
            return valueless(tuple(value.shape), _np_dtype(value.dtype, name), name)
        arr = value.detach().cpu().numpy()
        return constant(arr.copy(), name=name, dtype=_np_dtype(value.dtype, name))

    def node(self, n: Any, role: str) -> None:
        if n.target is operator.getitem:
            self.env[n] = self.env[n.args[0]][n.args[1]]
            return
        self._refuse(n)
        with node_role(role):
            self.env[n] = out = self._convert(n)
        if self.meta:        # a large constant a rule made (`full`): its shape, not its value
            for t in out if isinstance(out, tuple) else (out,):
                if isinstance(t, Tensor) and t.kind == "const" and t.nbytes >= _META_KEEP:
                    t.value = MetaValue(t.name, t.shape, str(t.dtype))

    def _refuse(self, n: Any) -> None:
        torch = self.torch
        if not isinstance(n.target, torch._ops.OpOverload):
            raise TorchImportError(f"node {n.name} calls {n.target}, not an ATen op (control "
                                   "flow such as torch.cond, or a Python function): the "
                                   "import needs one straight-line graph of ATen ops")
        if self._random(n) and self.short(n) not in SEEDED and self.short(n) not in RULES:
            raise TorchImportError(f"node {n.name} is the random op {n.target}, which has "
                                   f"no seeded minigraph op: {_random_advice(self.short(n))}")
        if n.target._schema.is_mutable:
            raise TorchImportError(f"node {n.name} is the in-place op {n.target}, which "
                                   "functionalisation did not remove; it cannot be imported")
        self.specs(n)                                   # refuses symbolic shapes, odd dtypes

    def _random(self, n: Any) -> bool:
        if self.short(n) in _RANDOM:
            return True
        if self.torch.Tag.nondeterministic_seeded not in n.target.tags:
            return False
        # Attention kernels carry the tag for their dropout: with dropout_p 0 they are exact.
        names = [a.name for a in n.target._schema.arguments]
        return "dropout_p" not in names or self.arg(n, names.index("dropout_p"), 0.0) != 0

    def _convert(self, n: Any) -> Any:
        short = self.short(n)
        fn: Callable | None = RULES.get(short)
        why = f"minigraph has no op for {n.target}"
        if self._constant_inputs(n):
            return self._fold(n)
        refused = unhonoured(n, short) if fn is not None else None
        if refused:
            why = f"not mapped: {refused}"
        elif fn is not None:
            try:
                out = fn(self, n)
                self._check(n, out)
            except (Unmapped, MinigraphError) as e:
                why = f"not mapped: {e}"
            except (TypeError, ValueError, IndexError, KeyError) as e:   # an unusual call
                why = f"not mapped: {type(e).__name__}: {e}"
            else:
                self.report.mapped[short] = self.report.mapped.get(short, 0) + 1
                if is_view(n):                 # a new tensor, not an input passed through
                    ins = {id(v) for v in self._flat(n.args)}
                    self.views.extend(t for t in (out if isinstance(out, tuple) else (out,))
                                      if isinstance(t, Tensor) and id(t) not in ins
                                      and t.call is not None and t.call.op in _COPIES)
                return out
        return self._opaque(n, short, why)

    def _constant_inputs(self, n: Any) -> bool:
        """Whether every tensor `n` reads is a constant made inside the step (index
        arithmetic on an `arange`, as the decompositions of roll and interpolate make, or an
        identity matrix): then PyTorch computes it now, once. Buffers and frozen parameters
        are not folded: the graph keeps reading them (the report lists them)."""
        if self._random(n) or not n.all_input_nodes or \
                any(a.op == "placeholder" for a in n.all_input_nodes):
            return False
        vals = [self.env.get(a) for a in n.all_input_nodes]
        return all(isinstance(v, Tensor) and v.kind == "const" for v in vals)

    def _fold(self, n: Any) -> Any:
        """The node's value, computed by PyTorch from constant inputs: constants again."""
        torch = self.torch
        meta = any(isinstance(self.env[a].value, MetaValue) for a in n.all_input_nodes)

        def real(a):
            if not isinstance(a, torch.fx.Node):
                return a
            t = self.env[a]
            return torch.empty(t.shape, dtype=getattr(torch, str(t.dtype)), device="meta") if meta \
                else torch.from_numpy(np.array(t.value))
        out = n.target(*torch.fx.node.map_arg(n.args, real),
                       **torch.fx.node.map_arg(n.kwargs, real))
        self.report.mapped["(constant)"] = self.report.mapped.get("(constant)", 0) + 1

        def const(v):
            if v.is_meta:                  # computed from values a meta model lacks
                return valueless(tuple(v.shape), _np_dtype(v.dtype, n.name))
            arr = v.detach().cpu().numpy()
            return constant(arr.copy(), dtype=_np_dtype(v.dtype, n.name))
        return tuple(const(v) for v in out) if isinstance(out, (tuple, list)) else const(out)

    def _check(self, n: Any, out: Any) -> None:
        specs = self.specs(n)
        outs = list(out) if isinstance(out, tuple) else [out]
        if len(outs) != len(specs):
            raise Unmapped(f"{len(outs)} outputs where PyTorch has {len(specs)}")
        for t, s in zip(outs, specs):
            if isinstance(t, Tensor) and s is not None and (t.shape, t.dtype) != s:
                raise Unmapped(f"minigraph infers {list(t.shape)} {t.dtype} where PyTorch "
                               f"has {list(s[0])} {s[1]}")

    def _opaque(self, n: Any, short: str, why: str) -> Any:
        ins = []
        for a in n.all_input_nodes:
            v = self._value(a, n)
            if isinstance(v, PoolIndices):
                v = self._indices(v, a)
            if isinstance(v, tuple):
                raise TorchImportError(f"node {n.name} reads a tuple {a.name}")
            if v is not None:                  # an output PyTorch left undefined
                ins.append(v)
        specs = self.specs(n)
        k = self._count[short] = self._count.get(short, -1) + 1
        name = f"aten_{short}_{k}"
        first = self.env.get(n.args[0]) if n.args else None
        view_of = next((k for k, t in enumerate(ins) if t is first), -1) if is_view(n) else -1
        outs = iter(opaque(ins, str(n.target), [s for s in specs if s is not None],
                           flops=self.flops(n, specs), view_of=view_of, note=why, name=name))
        self.report.opaque.append((name, str(n.target), why))
        vals = tuple(None if s is None else next(outs) for s in specs)
        if view_of >= 0:                  # its own buffer here, an alias in PyTorch
            self.views.extend(t for t in vals if t is not None)
        return vals if isinstance(n.meta.get("val"), (list, tuple)) else vals[0]

    def _indices(self, v: PoolIndices, a: Any) -> Tensor:
        """max_pool2d's indices as a tensor, for an opaque reader: an opaque node of its own."""
        spec = self.specs(a.args[0])[1]
        return opaque([v.x], "aten.max_pool2d_with_indices (indices)", [spec],
                      note="max-pool indices, read by an opaque node")[0]

    def flops(self, n: Any, specs: list) -> int:
        """PyTorch's FLOP count for this node (run on meta tensors); else one per output
        element, minigraph's elementwise default."""
        counted = self.torch_flops(n)
        return counted if counted else sum(int(np.prod(s[0])) for s in specs if s)

    def torch_flops(self, n: Any) -> int:
        """PyTorch's FLOP counter on this node. An op it has no formula for and that does
        not decompose (the counter then counts what the pieces are) counts 0 without
        running: most nodes of a step are such (elementwise, views, reductions)."""
        if not _counted(self.torch, n.target):
            return 0
        return self.counted_flops(n)

    def counted_flops(self, n: Any) -> int:
        """PyTorch's FLOP counter run on this node, on meta tensors of its shapes."""
        torch = self.torch
        from torch.utils.flop_counter import FlopCounterMode

        def meta(a):
            v = a.meta.get("val")
            return torch.empty(v.shape, dtype=v.dtype, device="meta") \
                if isinstance(v, torch.Tensor) else v
        try:
            args = torch.fx.node.map_arg(n.args, meta)
            kwargs = torch.fx.node.map_arg(n.kwargs, meta)
            with FlopCounterMode(display=False) as fc:
                n.target(*args, **kwargs)
            return int(fc.get_total_flops())
        except Exception:            # an op the meta device cannot run: no count
            return 0


_COUNTED: dict[Any, bool] = {}


def _counted(torch: Any, op: Any) -> bool:
    """Whether PyTorch's FLOP counter can count anything for `op`: it has a formula for
    it, or `op` decomposes (CompositeImplicitAutograd), which the counter then follows
    (`FlopCounterMode.__torch_dispatch__`). Otherwise the count is 0."""
    if op not in _COUNTED:
        from torch.utils.flop_counter import flop_registry
        key = torch._C.DispatchKey.CompositeImplicitAutograd
        packet = getattr(op, "_overloadpacket", None)
        _COUNTED[op] = packet is None or packet in flop_registry or \
            key in getattr(op, "py_kernels", {}) or \
            torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), key)
    return _COUNTED[op]


def valueless(shape: tuple[int, ...], dtype: str, name: str | None = None) -> Tensor:
    """A constant of a meta-device import: its shape and dtype, its value a `MetaValue`
    (nothing allocated; an executor reading it raises MetaModelError)."""
    t = constant(np.zeros((), dtype), name=name, dtype=dtype)
    t.shape, t.value = tuple(shape), MetaValue(t.name, tuple(shape), dtype)
    return t


def _random_advice(short: str) -> str:
    """What to do about a random op the import cannot draw, fitting the op."""
    if short in ("randint", "randint_like", "randperm", "multinomial"):
        return ("it draws integers (indices). Draw them outside the step and pass them as "
                "an input (from_torch(..., targets=(idx,))), so that minigraph reads them")
    return ("a distribution minigraph does not draw (it draws uniform, normal and Bernoulli "
            "noise). Draw the noise outside the step and pass it as an input "
            "(targets=(noise,)); eval mode does not remove a draw the model itself makes")


def _ancestors(roots: list[Any]) -> set[Any]:
    seen, stack = set(), list(roots)
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        stack.extend(n.all_input_nodes)
    return seen


def convert(cap: Captured, torch: Any, lr: float, name: str,
            module: str) -> tuple[Graph, str, tuple[str, ...], ImportReport]:
    """The minigraph training graph of a captured step: outputs [loss, *(p + "_new")]."""
    sig, graph = cap.signature, cap.gm.graph
    by_name = {n.name: n for n in graph.nodes}
    loss_fx = by_name[sig.user_outputs[0]]
    grads_fx: dict[str, list[Any]] = {}     # a tied parameter has one gradient per name
    for out, full in sig.backward_signature.gradients_to_parameters.items():
        for ph, f in sig.inputs_to_parameters.items():
            if f == full:
                grads_fx.setdefault(cap.names[cap.tied.get(ph, ph)], []).append(by_name[out])
    params = [cap.names[ph] for ph in sig.inputs_to_parameters if ph not in cap.tied]
    frozen = {p for p in params if p not in grads_fx}
    report = ImportReport(module)
    report.frozen = sorted(frozen)
    report.constants = [cap.names[ph] for ph in sig.inputs_to_buffers]
    report.dropped = sorted(f.removeprefix("m.").replace(".", "_")
                            for f in sig.buffers_to_mutate.values())
    report.notes += [f"tied weights: {cap.names[ph]} is {cap.names[first]} (one parameter, "
                     "its gradients summed)" for ph, first in cap.tied.items()]
    if cap.unused:
        report.notes.append(f"parameters the loss does not use, frozen for the import (no "
                            f"gradient, no update; requires_grad_(False) on them says so "
                            f"yourself): {', '.join(cap.unused)}")
    kept = _ancestors([loss_fx, *(g for gs in grads_fx.values() for g in gs)])
    forward = _ancestors([loss_fx])
    loss_spec = _spec(loss_fx.meta.get("val"), "the loss")
    if loss_spec is None or loss_spec[0] != () or loss_spec[1] not in _FLOATS:
        raise TorchImportError(f"the loss must be a floating scalar, not {loss_spec}")
    clock = [time.perf_counter()]
    with name_scope():
        c = Converter(cap, torch, report)
        c.leaves(frozen)
        _lap(report, "weights", clock)
        for n in graph.nodes:
            if n.op == "call_function" and n in kept:
                c.node(n, "forward" if n in forward else "backward")
                if n.target is not operator.getitem:
                    report.aten_nodes += 1
                    report.torch_flops += c.torch_flops(n)
        _lap(report, "nodes", clock)
        loss = c.env[loss_fx]
        trained = [p for p in params if p not in frozen]
        leaf = {p: c.env[by_name[ph]] for ph, p in cap.names.items() if p in trained}
        grads = {p: _summed([c.env[g] for g in grads_fx[p]]) for p in trained}
        updates = _updates(loss, [leaf[p] for p in trained], [grads[p] for p in trained], lr)
        g = Graph([loss, *updates], name=name)
    report.constants = [b for b in report.constants if b in g.tensors]
    report.graph_flops = g.flops()
    live = [t for t in c.views if t.name in g.tensors and g.tensors[t.name].producer]
    report.view_copies = (len(live), sum(t.nbytes for t in live))
    _lap(report, "graph", clock)
    report.seconds["trace"] = cap.seconds
    return g, loss.name, tuple(trained), report


def convert_inference(cap: Captured, torch: Any, lr: float, name: str,
                      module: str) -> tuple[Graph, str, tuple[str, ...], ImportReport]:
    """The minigraph forward graph of a captured forward pass (`from_torch(...,
    loss_fn=None)`): outputs the module's outputs, no backward, no update. The weights stay
    parameters (fed, like the training step's), so every planner accounts as it does for
    training; the first output stands where the loss does."""
    sig, graph = cap.signature, cap.gm.graph
    by_name = {n.name: n for n in graph.nodes}
    outs_fx = [by_name[o] for o in sig.user_outputs]
    if not outs_fx:
        raise TorchImportError(f"{module} returns no tensor: nothing to import")
    report = ImportReport(module)
    report.constants = [cap.names[ph] for ph in sig.inputs_to_buffers]
    report.notes.append("inference: the forward pass alone (eval mode), no backward, "
                        "no update")
    kept = _ancestors(outs_fx)
    clock = [time.perf_counter()]
    with name_scope():
        c = Converter(cap, torch, report)
        c.leaves(set())
        _lap(report, "weights", clock)
        for n in graph.nodes:
            if n.op == "call_function" and n in kept:
                c.node(n, "forward")
                if n.target is not operator.getitem:
                    report.aten_nodes += 1
                    report.torch_flops += c.torch_flops(n)
        _lap(report, "nodes", clock)
        outs = []
        for o in outs_fx:
            t = c.env[o]
            if not isinstance(t, Tensor) or t.call is None:
                raise TorchImportError(f"{module}: output {o.name} is not computed by the "
                                       "forward pass (an input or a weight passed through)")
            if t not in outs:
                outs.append(t)
        g = Graph(outs, name=name)
    report.constants = [b for b in report.constants if b in g.tensors]
    report.graph_flops = g.flops()
    live = [t for t in c.views if t.name in g.tensors and g.tensors[t.name].producer]
    report.view_copies = (len(live), sum(t.nbytes for t in live))
    _lap(report, "graph", clock)
    report.seconds["trace"] = cap.seconds
    return g, outs[0].name, (), report


def _lap(report: ImportReport, part: str, clock: list[float]) -> None:
    """Add the seconds since `clock[0]` to `report.seconds[part]`; restart the clock."""
    now = time.perf_counter()
    report.seconds[part] = report.seconds.get(part, 0.0) + now - clock[0]
    clock[0] = now


def _summed(grads: list[Tensor]) -> Tensor:
    """A parameter's gradient: the sum over the names it is read under."""
    total = grads[0]
    for g in grads[1:]:
        total = ops.add(total, g)
    return total


def _updates(loss: Tensor, params: list[Tensor], grads: list[Tensor], lr: float) -> list[Tensor]:
    """`autodiff.sgd_updates`, once each gradient is known to fit its parameter."""
    for p, g in zip(params, grads):
        if g.shape != p.shape:
            raise TorchImportError(f"the gradient of {p.name} has shape {list(g.shape)}, "
                                   f"the parameter {list(p.shape)}")
    return sgd_updates(loss, params, grads, lr)


def make_batch_fn(cap: Captured) -> Callable[[int], dict[str, np.ndarray]]:
    """The example batch for seed 0; another seed, a random batch of the same shapes and
    dtypes (floats N(0, 1), integers in [0, the largest example value])."""
    for ph in cap.values:
        _np_dtype(cap.values[ph].dtype, cap.names[ph])      # refuse what NumPy lacks first
    meta = [cap.names[ph] for ph, k in cap.kinds.items()
            if k == "input" and cap.values[ph].is_meta]
    if meta:
        def no_batch(seed: int = 0) -> dict[str, np.ndarray]:
            raise MetaModelError(f"input {meta[0]} comes from PyTorch's meta device: a meta "
                                 "model has shapes, no values, so it has no batch to run; "
                                 "it plans and simulates")
        return no_batch
    example = {cap.names[ph]: cap.values[ph].cpu().numpy().copy()
               for ph, k in cap.kinds.items() if k == "input"}

    def make_batch(seed: int = 0) -> dict[str, np.ndarray]:
        if seed == 0:
            return {k: v.copy() for k, v in example.items()}
        rng = np.random.default_rng(seed)
        out = {}
        for k, v in example.items():
            if v.dtype.kind in "iub":
                out[k] = rng.integers(0, int(v.max(initial=0)) + 1, v.shape).astype(v.dtype)
            else:
                out[k] = rng.standard_normal(v.shape).astype(v.dtype)
        return out
    return make_batch


@dataclass(repr=False)
class TorchModel(Model):
    """An imported training step: a `Model` (outputs `[loss, *(p + "_new")]`, one run is
    one SGD step; `init_params` gives the module's own weights) plus the import's `report`.
    """
    report: ImportReport | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return f"<TorchModel {self.name}: {len(self.graph)} nodes, loss {self.loss}>"

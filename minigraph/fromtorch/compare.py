"""Is the imported step PyTorch's? One run of each, loss and every gradient compared.

`compare(model, module, inputs, loss_fn, targets)` runs the imported graph once (its
gradients as outputs) and PyTorch's own eager step of `module` on the same batch and
weights, and gives each parameter's gradient error relative to its largest element.

Random ops: minigraph draws its own noise (`minigraph.ops.random`, a pure function of a
key), so PyTorch's step is run with each of its draws replaced, in order, by minigraph's
draw for the same node (a `TorchDispatchMode` feeds `native_dropout`, `bernoulli`,
`rand*`, `randn*`, `normal_` and `uniform_` the noise): the same mask, the same noise.

Rounding: float32 sums in another order differ by about 1e-7 relative per op; a deep
convolutional net amplifies that (batch norm over a batch of 2 divides by small variances,
ReLU masks flip on values near 0), and torchvision's ResNet-18 differs from its own float64
run by up to 1e-1 relative on some gradients. A float32 difference alone cannot tell a
wrong import from rounding: `check.rounding` is PyTorch's own float32 gradients against
PyTorch's float64 ones (the size rounding reaches on this model), and `compare(...,
float64=True)` re-runs both sides in float64, where an exact import agrees to ~1e-10 (to
~1e-7 on a deep net whose last batch norms see a batch of 2): that re-run decides.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..graph import Graph
from ..ops.random import sample
from ..ops.registry import KernelContext, get_op
from .capture import TorchImportError, as_tuple, require_torch

FLOAT32_TOLERANCE = 1e-3    # relative to a gradient's largest element
FLOAT64_TOLERANCE = 1e-6   # deep nets with batch norm over 2 values amplify even float64
#: Below this fraction of the step's largest gradient element, a gradient is measured
#: against that fraction instead of its own size (see `_errors`).
ZERO_FLOOR = {"float16": 1e-2, "float32": 1e-3, "float64": 1e-6}


@dataclass
class StepCheck:
    """Loss and per-parameter gradient errors of an imported step against PyTorch's."""
    dtype: str
    loss: float
    torch_loss: float
    errors: dict[str, float] = field(default_factory=dict)   # parameter -> relative error
    rounding: float | None = None   # PyTorch float32 vs float64, the rounding's own size

    @property
    def worst(self) -> tuple[str, float]:
        return max(self.errors.items(), key=lambda kv: kv[1], default=("", 0.0))

    @property
    def loss_error(self) -> float:
        return abs(self.loss - self.torch_loss) / max(abs(self.torch_loss), 1e-30)

    def ok(self, tolerance: float | None = None) -> bool:
        tol = tolerance if tolerance is not None else (
            FLOAT64_TOLERANCE if self.dtype == "float64" else FLOAT32_TOLERANCE)
        return self.loss_error <= tol and self.worst[1] <= tol

    def __str__(self) -> str:
        name, err = self.worst
        lines = [f"{self.dtype}: loss {self.loss:.8g} (PyTorch {self.torch_loss:.8g}, relative "
                 f"error {self.loss_error:.1e}); worst gradient {name}: {err:.1e} relative to "
                 "its largest element"]
        if self.rounding is not None:
            lines.append(f"PyTorch's own float32 step differs from its float64 step by "
                         f"{self.rounding:.1e}: float32 rounding reaches that far here")
        if self.dtype != "float64" and not self.ok():
            lines.append("beyond float32's tolerance: re-run with compare(..., float64=True); "
                         "an exact import agrees there to ~1e-10, a wrong one does not")
        return "\n".join(lines)


def _gradient_graph(model: Any) -> tuple[Graph, dict[str, str]]:
    """The model's graph with the loss and each parameter's gradient as outputs (no update)."""
    g = model.graph
    grads, drop = {}, set()
    for node in g.nodes:
        if node.op == "sgd_update":
            grads[node.inputs[0]] = node.inputs[1]
            drop.add(node.name)
    nodes = [n for n in g.nodes if n.name not in drop]
    made = {o for n in g.nodes if n.name in drop for o in n.outputs}
    tensors = {k: v for k, v in g.tensors.items() if k not in made}
    return Graph.from_nodes(nodes, tensors, [model.loss, *grads.values()], g.name), grads


def _run(graph: Graph, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One plain run on NumPy, a buffer per tensor, step 0 and seed 0 (the executor's
    defaults: the same draws). The runtime layer sits above this one, so the check runs
    the kernels itself; no plan is needed to compare values."""
    vals = {name: np.asarray(feeds[name]) if name in feeds else np.asarray(t.value)
            for name, t in graph.tensors.items() if t.producer is None}
    for node in graph.nodes:
        outs = [np.empty(graph.tensors[o].shape, graph.tensors[o].dtype) for o in node.outputs]
        get_op(node.op).forward(KernelContext(np, node.name), node.attr,
                                [vals[i] for i in node.inputs], outs)
        vals.update(zip(node.outputs, outs))
    return {o: vals[o] for o in graph.outputs}


def draws(graph: Graph) -> list[tuple[str, np.ndarray]]:
    """(kind, value) of each random node of `graph` in order, as a run at step 0 draws."""
    return [(n.attr["kind"], sample(dict(n.attr), tuple(n.attr["shape"]), n.attr["dtype"]))
            for n in graph.nodes if n.op == "random"]


_FILLS = {"rand_like": "uniform", "rand": "uniform", "uniform_": "uniform",
          "randn_like": "normal", "randn": "normal", "normal_": "normal"}


def _noise_mode(torch: Any, noise: list[tuple[str, np.ndarray]]) -> Any:
    """A dispatch mode that answers each random op of PyTorch's eager step with the next
    draw of the graph. Eager `nn.Dropout` on the CPU draws `bernoulli_(1 - p)` where the
    captured graph has `native_dropout`'s `rand_like(x) > p`: the same mask, given the
    same uniform numbers."""
    from torch.utils._python_dispatch import TorchDispatchMode
    queue = list(noise)

    def take(kind: str, like: Any, p: float = 0.5) -> Any:
        if not queue:
            raise TorchImportError("compare: PyTorch's step draws more random numbers than "
                                   "the imported graph")
        k, v = queue.pop(0)
        if tuple(v.shape) != tuple(like.shape) or (k != kind and (kind, k) != (
                "bernoulli", "uniform")):
            raise TorchImportError(f"compare: PyTorch draws {kind} noise of shape "
                                   f"{list(like.shape)} where the graph drew {k} "
                                   f"{list(v.shape)}")
        if kind == "bernoulli" and k == "uniform":
            v = (v > 1.0 - p).astype(v.dtype)            # dropout's keep mask, u > p
        return torch.from_numpy(v.copy()).to(like.dtype)

    class Noise(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = func.overloadpacket.__name__
            if name == "native_dropout":
                x, p, train = args[0], float(args[1]), args[2] if len(args) > 2 else True
                if train is False or p == 0:
                    return func(*args, **kwargs)
                mask = take("uniform", x) > p
                return mask * x * (1.0 / (1.0 - p)), mask
            overload = func._overloadname
            if (name, overload) in (("bernoulli_", "float"), ("bernoulli", "p")):
                p = float(args[1] if len(args) > 1 else kwargs.get("p", 0.5))
                d = take("bernoulli", args[0], p)
                return args[0].copy_(d) if name == "bernoulli_" else d
            if (name, overload) == ("bernoulli", "default"):
                return (take("uniform", args[0]) < args[0]).to(args[0].dtype)
            if name in _FILLS:
                like = func(*args, **kwargs) if not name.endswith("_") else args[0]
                d = take(_FILLS[name], like)
                lo, hi = (list(args[1:3]) + [None, None])[:2]
                if name == "normal_":
                    d = d * (1.0 if hi is None else hi) + (0.0 if lo is None else lo)
                if name == "uniform_":
                    d = d * ((1.0 if hi is None else hi) - (lo or 0.0)) + (lo or 0.0)
                return args[0].copy_(d) if name.endswith("_") else d
            names = [a.name for a in func._schema.arguments]
            exact = "dropout_p" in names and not (      # attention without dropout
                len(args) > names.index("dropout_p") and args[names.index("dropout_p")]) \
                and not kwargs.get("dropout_p")
            if torch.Tag.nondeterministic_seeded in func.tags and not exact:
                raise TorchImportError(f"compare: PyTorch's step calls the random op {func}, "
                                       "which the check cannot feed minigraph's noise")
            return func(*args, **kwargs)
    return Noise()


def _torch_step(torch: Any, module: Any, inputs: tuple, loss_fn: Callable[..., Any],
                targets: tuple, noise: list, dtype: Any | None) -> tuple[float, dict]:
    net = copy.deepcopy(module)
    if dtype is not None:
        net = net.to(dtype)
        inputs = tuple(t.to(dtype) if t.is_floating_point() else t for t in inputs)
        targets = tuple(t.to(dtype) if t.is_floating_point() else t for t in targets)
    net.zero_grad(set_to_none=True)
    with torch.backends.mkldnn.flags(enabled=False), _noise_mode(torch, noise):
        loss = loss_fn(net(*inputs), *targets)
        loss.backward()
    grads = {n.replace(".", "_"): p.grad.detach().double().numpy()
             for n, p in net.named_parameters() if p.grad is not None}
    return float(loss), grads


def _errors(ours: dict, theirs: dict, floor: float) -> dict[str, float]:
    """Each gradient's largest difference, relative to its largest element, or to `floor`
    times the step's largest gradient element where a gradient is smaller than that (one
    zero in exact arithmetic, as the bias of a layer before batch norm, is rounding noise
    whose relative error means nothing)."""
    out = {}
    top = max((float(np.max(np.abs(r), initial=0.0)) for r in theirs.values()), default=0.0)
    for name, ref in theirs.items():
        if name in ours:
            scale = max(float(np.max(np.abs(ref), initial=0.0)), floor * top, 1e-30)
            out[name] = float(np.max(np.abs(ours[name] - ref), initial=0.0)) / scale
    return out


def compare(model: Any, module: Any, example_inputs: Any, loss_fn: Callable[..., Any],
            targets: Any = (), *, float64: bool = False) -> StepCheck:
    """The imported `model`'s step against PyTorch's eager step of `module` (see the module
    docstring); `float64=True` imports and runs both in float64, the check that decides."""
    torch = require_torch()
    inputs = as_tuple(example_inputs, "example_inputs")
    targs = () if isinstance(targets, tuple) and not targets else as_tuple(targets, "targets")
    if float64:
        from . import from_torch  # the package's entry point (it imports this module)

        def wide(ts):
            return tuple(t.double() if t.is_floating_point() else t for t in ts)
        module = copy.deepcopy(module).double()
        inputs, targs = wide(inputs), wide(targs)
        model = from_torch(module, inputs, loss_fn, targets=targs, lr=model.lr)
    g, grads = _gradient_graph(model)
    out = _run(g, model.feeds(0))
    ours = {p: np.asarray(out[gname], dtype=np.float64) for p, gname in grads.items()}
    noise = draws(model.graph)
    dtype = model.graph.tensors[model.loss].dtype
    t_loss, theirs = _torch_step(torch, module, inputs, loss_fn, targs, noise, None)
    floor = ZERO_FLOOR[dtype] if dtype in ZERO_FLOOR else ZERO_FLOOR["float32"]
    check = StepCheck(dtype, float(out[model.loss]), t_loss, _errors(ours, theirs, floor))
    if dtype == "float32":
        wide_noise = [(k, v.astype(np.float64)) for k, v in noise]
        try:
            _, exact = _torch_step(torch, module, inputs, loss_fn, targs, wide_noise,
                                   torch.float64)
        except RuntimeError:      # a module that makes float32 tensors of its own
            return check
        check.rounding = max(_errors(theirs, exact, floor).values(), default=0.0)
    return check

"""PyTorch eager as the reference: the same forward graph, run op by op with torch ops.

`TorchStep(graph)` replays the *forward* nodes of a minigraph training graph with torch
(autograd on), calls `loss.backward()`, and applies the same SGD update. Benchmarks time it
against minigraph's own executor on the same shapes and dtype, and tests compare losses and
gradients. Dropout uses torch's own RNG (a different mask), so compare values only on
graphs without dropout.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .graph import Graph


def _torch():
    import torch
    return torch


def _getitem(x, a):
    idx = []
    for e in a["index"]:
        if e[0] == "i":
            idx.append(e[1])
        else:
            _, start, step, count = e
            idx.append(slice(start, start + step * count, step) if step > 0 else
                       slice(start, None if start + step * count < 0 else
                             start + step * count, step))
    t = _torch()
    if any(e[0] == "s" and e[2] < 0 for e in a["index"]):   # torch has no negative steps
        return t.from_numpy(np.ascontiguousarray(x.detach().cpu().numpy()[tuple(idx)])) \
            .to(x.device)
    return x[tuple(idx)]


def _pool(fn):
    def run(x, a):
        return fn(x, a["kernel"], a["stride"], a["padding"])
    return run


def _ops() -> dict[str, Callable[..., Any]]:
    """Forward op name -> torch implementation (inputs, attrs) -> output (or tuple)."""
    t = _torch()
    F = t.nn.functional

    def red(fn):
        return lambda x, a: fn(x, dim=tuple(a["axes"]), keepdim=a["keepdims"]) \
            if a["axes"] else x.clone()

    def mm(x, y, a):
        return t.matmul(x.transpose(-1, -2) if a["ta"] else x,
                        y.transpose(-1, -2) if a["tb"] else y)

    def norm(x, g, b, a, dims):
        mean = x.mean(dim=dims, keepdim=True)
        var = x.var(dim=dims, keepdim=True, unbiased=False)
        shape = [1] * x.ndim
        shape[-1 if dims == (-1,) else 1] = -1
        return (x - mean) * t.rsqrt(var + a["eps"]) * g.reshape(shape) + b.reshape(shape)

    def bn(x, g, b, a):
        dims = (0,) if x.ndim == 2 else (0, 2, 3)
        return norm(x, g, b, a, dims)

    return {
        "add": lambda x, y, a: x + y, "sub": lambda x, y, a: x - y,
        "mul": lambda x, y, a: x * y, "div": lambda x, y, a: x / y,
        "add_scalar": lambda x, a: x + a["c"], "mul_scalar": lambda x, a: x * a["c"],
        "rsub_scalar": lambda x, a: a["c"] - x, "rdiv_scalar": lambda x, a: a["c"] / x,
        "pow": lambda x, a: x ** a["p"], "neg": lambda x, a: -x,
        "exp": lambda x, a: t.exp(x), "log": lambda x, a: t.log(x),
        "sqrt": lambda x, a: t.sqrt(x), "relu": lambda x, a: t.relu(x),
        "sigmoid": lambda x, a: t.sigmoid(x), "tanh": lambda x, a: t.tanh(x),
        "gelu": lambda x, a: F.gelu(x, approximate="tanh"),
        "add_n": lambda *xs: sum(xs[:-1][1:], xs[0]),
        "sum": red(t.sum), "mean": red(t.mean),
        "max": lambda x, a: t.amax(x, dim=tuple(a["axes"]), keepdim=a["keepdims"]),
        "broadcast_to": lambda x, a: x.expand(*a["shape"]),
        "sum_to": lambda x, a: x.sum_to_size(*a["shape"]),
        "reshape": lambda x, a: x.reshape(a["shape"]),
        "transpose": lambda x, a: x.permute(*a["axes"]),
        "matmul": mm, "getitem": _getitem,
        "concat": lambda *xs: t.cat(xs[:-1], dim=xs[-1]["axis"]),
        "softmax": lambda x, a: t.softmax(x, dim=a["axis"]),
        "log_softmax": lambda x, a: t.log_softmax(x, dim=a["axis"]),
        "softmax_cross_entropy": lambda x, y, a: F.cross_entropy(
            x.reshape(-1, x.shape[-1]), y.reshape(-1)),
        "mse": lambda x, y, a: F.mse_loss(x, y),
        "layer_norm": lambda x, g, b, a: F.layer_norm(x, (x.shape[-1],), g, b, a["eps"]),
        "batch_norm": bn,
        "conv2d": lambda x, w, a: F.conv2d(x, w, stride=a["stride"], padding=a["padding"]),
        "max_pool2d": _pool(F.max_pool2d),
        "avg_pool2d": lambda x, a: F.avg_pool2d(x, a["kernel"], a["stride"], a["padding"],
                                                count_include_pad=True),
        "embedding": lambda ids, w, a: F.embedding(ids, w),
        "dropout": lambda x, a: F.dropout(x, a["p"], training=True),
    }


class TorchStep:
    """One SGD training step of `graph` in PyTorch eager (forward nodes replayed, autograd
    for the backward, `p -= lr * p.grad` for the update)."""

    def __init__(self, graph: Graph, feeds: Mapping[str, np.ndarray], device: str = "cpu"):
        t = _torch()
        self.graph, self.device = graph, device
        self.table = _ops()
        self.values = {}
        for name, v in feeds.items():
            tv = t.from_numpy(np.ascontiguousarray(v)).to(device)
            if graph.tensors[name].kind == "param":
                tv.requires_grad_(True)
            self.values[name] = tv
        for c in graph.leaves("const"):
            self.values[c.name] = t.from_numpy(np.asarray(c.value)).to(device)
        self.forward = [n for n in graph.nodes if n.role == "forward"]
        self.updates = [n for n in graph.nodes if n.op == "sgd_update"]
        self.loss_name = next(o for o in graph.outputs if graph.tensors[o].alias_of is None)
        missing = sorted({n.op for n in self.forward} - set(self.table))
        if missing:
            raise NotImplementedError(f"no torch reference for ops {missing}")

    def run(self, update: bool = True) -> Any:
        """Forward, backward, update. Returns the loss tensor (on the device)."""
        t = _torch()
        env = dict(self.values)
        for n in self.forward:
            args = [env[i] for i in n.inputs]
            out = self.table[n.op](*args, n.attr)
            env[n.outputs[0]] = out
        loss = env[self.loss_name]
        for n in self.updates:
            p = self.values[n.inputs[0]]
            p.grad = None
        loss.backward()
        if update:
            with t.no_grad():
                for n in self.updates:
                    p = self.values[n.inputs[0]]
                    p.sub_(p.grad, alpha=n.attr["lr"])
        return loss

    def grads(self) -> dict[str, np.ndarray]:
        return {n.inputs[0]: self.values[n.inputs[0]].grad.detach().cpu().numpy()
                for n in self.updates}

"""Seeded random ops: uniform and normal noise and Bernoulli draws, pure functions of a key.

PyTorch's random ops (`rand_like`, `randn_like`, `bernoulli`, the mask of train-mode
dropout) draw from a generator whose state advances with each call; rerunning one gives a
new draw. minigraph's kernels may run twice (DTR rematerialises an evicted tensor by
running its node again [Kirisame 2021]), so a draw here is a pure function of (the op's
seed, the node's key, the executor's seed and step, the element's index): SplitMix64's
counter-based stream [Steele 2014], as `mg.dropout`'s mask. Running the node again gives
the same draw, bit for bit; the next step (`Executor.run(step=k)`) a new one. The draw is
made on the host in NumPy and copied to the device, so NumPy and CuPy runs draw alike.

- `random_uniform`: U[0, 1), 53 random bits per element (float64), then cast.
- `random_normal`: N(0, 1) by the Box-Muller transform of two uniform streams.
- `random_bernoulli`: 1 with probability `p` (an attribute), else 0, in the output dtype.

Each op reads one input only for its place in the graph (the tensor whose shape a `*_like`
call copies, or a 0-d constant): its values do not matter and it takes no gradient.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from ..errors import ArgumentError
from ..graph import Tensor
from ..tensor import _auto_name
from .nn import _C1, _C2, _GOLDEN, _M64, _mix64
from .registry import apply1, defop, numel

_KINDS = ("uniform", "normal", "bernoulli")


def draw_key(attrs: dict, seed: int = 0, step: int = 0) -> int:
    """One 64-bit key per (op seed, node key, executor seed, step)."""
    k = _mix64(attrs["seed"] & _M64)
    for part in (seed, attrs["key"], step):
        k = _mix64(k ^ (int(part) & _M64))
    return k


def _uniform(key: int, n: int) -> np.ndarray:
    """n numbers in [0, 1): the top 53 bits of SplitMix64's outputs 1..n keyed by `key`."""
    with np.errstate(over="ignore"):
        z = np.arange(1, n + 1, dtype=np.uint64) * np.uint64(_GOLDEN) + np.uint64(key)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(_C1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(_C2)
        z ^= z >> np.uint64(31)
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def sample(attrs: dict, shape: tuple[int, ...], dtype: str, seed: int = 0,
           step: int = 0) -> np.ndarray:
    """The draw of a random op (NumPy, on the host): what its kernel writes, and what a
    check against PyTorch feeds PyTorch's step in place of its own generator's draw."""
    n, key = int(np.prod(shape, dtype=np.int64)), draw_key(attrs, seed, step)
    u = _uniform(key, n)
    if attrs["kind"] == "normal":        # Box-Muller on two independent streams
        v = _uniform(_mix64(key ^ 0x5DEECE66D), n)
        u = np.sqrt(-2.0 * np.log1p(-u)) * np.cos(2.0 * math.pi * v)
    elif attrs["kind"] == "bernoulli":
        u = (u < attrs["p"]).astype(np.float64)
    return u.reshape(shape).astype(dtype)


def _infer(attrs, x):
    return [(tuple(attrs["shape"]), attrs["dtype"])]


def _forward(ctx, attrs, ins, outs):
    out = outs[0]
    drawn = sample(attrs, out.shape, str(out.dtype), ctx.seed, ctx.step)
    out[...] = ctx.xp.asarray(drawn)


def _flops(attrs, ins, outs):
    return 12 * numel(outs[0]) * (2 if attrs["kind"] == "normal" else 1)


def _workspace(attrs, ins, outs):
    # the draw is made in float64 on the host: the counters, their hash and the uniforms
    # (and, for normal noise, a second stream and the transform's temporaries)
    return numel(outs[0]) * 8 * (8 if attrs["kind"] == "normal" else 4)


defop("random", infer=_infer, forward=_forward, differentiable=(), flops=_flops,
      workspace=_workspace)


def random(anchor: Tensor, kind: str, shape: tuple[int, ...], dtype: str, p: float = 0.5,
           seed: int = 0, name: str | None = None) -> Tensor:
    """A seeded draw of `shape` and `dtype`: "uniform" U[0, 1), "normal" N(0, 1), or
    "bernoulli" (1 with probability p). `anchor` places it in the graph (its values are
    not read). The same (seed, name, executor seed, step) gives the same draw."""
    if kind not in _KINDS:
        raise ArgumentError(f"random: kind must be one of {_KINDS}, not {kind!r}")
    if np.dtype(dtype).kind != "f":
        raise ArgumentError(f"random({anchor.name}): dtype {dtype} is not floating")
    if kind == "bernoulli" and not 0.0 <= p <= 1.0:
        raise ArgumentError(f"random({anchor.name}): p must be in [0, 1], not {p!r}")
    name = name or _auto_name(f"random_{kind}")
    attrs = {"kind": kind, "shape": tuple(int(d) for d in shape), "dtype": str(dtype),
             "p": float(p), "seed": int(seed), "key": zlib.crc32(name.encode())}
    return apply1("random", [anchor], attrs, name=name)

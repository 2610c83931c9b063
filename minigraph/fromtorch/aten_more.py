"""More ATen rules, in the manner of aten.py: the gradients of indexing, activations beyond
ReLU, masks, reductions, group norm, two more losses and fused attention.

Importing this module registers its rules in `aten.RULES` (the importer imports it). Each
rule declares the arguments it honours, as every rule must.
"""

from __future__ import annotations

import math

import numpy as np

from .. import ops
from ..graph import Tensor, constant
from ..ops.activations import clamp_grad
from ..ops.registry import apply, apply1
from .aten import Unmapped, cast_to, rule, scalar

# --- the gradients of indexing: scatter into zeros (getitem_grad) -----------------------------


def _scatter(g: Tensor, sizes, dim: int, entry: tuple) -> Tensor:
    """g written into zeros of `sizes` at `entry` along axis `dim` (getitem's gradient)."""
    sizes = tuple(int(s) for s in sizes)
    index = tuple(entry if k == dim else ("s", 0, 1, s) for k, s in enumerate(sizes))
    return apply1("getitem_grad", [g], {"index": index, "shape": sizes})


@rule("select_backward", args="grad_output input_sizes dim index")
def _select_backward(c, n):
    g, sizes, dim, index = (c.arg(n, k) for k in range(4))
    dim = dim % len(sizes)
    return _scatter(g, sizes, dim, ("i", index % sizes[dim]))


@rule("slice_backward", args="grad_output input_sizes dim start end step")
def _slice_backward(c, n):
    g, sizes, dim, start, end, step = (c.arg(n, k) for k in range(6))
    dim = dim % len(sizes)
    begin, stop, step = slice(start, end, step).indices(sizes[dim])
    return _scatter(g, sizes, dim, ("s", begin, step, len(range(begin, stop, step))))


# --- activations ------------------------------------------------------------------------------

@rule("silu", args="self")
def _silu(c, n):
    return ops.silu(c.arg(n, 0))


@rule("silu_backward", args="grad_output self")
def _silu_backward(c, n):
    return apply1("silu_grad", [c.arg(n, 0), c.arg(n, 1)])


@rule("hardtanh", args="self min_val max_val")
def _hardtanh(c, n):                    # ReLU6 is hardtanh(x, 0, 6)
    return ops.clamp(c.arg(n, 0), c.arg(n, 1, -1.0), c.arg(n, 2, 1.0))


@rule("hardtanh_backward", args="grad_output self min_val max_val")
def _hardtanh_backward(c, n):           # strictly inside (min, max), unlike clamp's
    g, x, lo, hi = (c.arg(n, k) for k in range(4))
    return clamp_grad(g, x, lo, hi, inclusive=False)


@rule("clamp", "clamp_min", "clamp_max", args="self min max")
def _clamp(c, n):
    short, x = c.short(n), c.arg(n, 0)
    lo = c.arg(n, 1) if short in ("clamp", "clamp_min") else None
    hi = c.arg(n, 2 if short == "clamp" else 1) if short in ("clamp", "clamp_max") else None
    if isinstance(lo, Tensor) or isinstance(hi, Tensor):
        raise Unmapped("tensor bounds (numbers map)")
    return ops.clamp(x, lo, hi)


@rule("leaky_relu", args="self negative_slope")
def _leaky_relu(c, n):
    return ops.leaky_relu(c.arg(n, 0), c.arg(n, 1, 0.01))


@rule("leaky_relu_backward", args="grad_output self negative_slope self_is_result")
def _leaky_relu_backward(c, n):
    g, x, slope, on_result = (c.arg(n, k) for k in range(4))
    if on_result and slope < 0:          # y's sign is x's only for a slope >= 0
        raise Unmapped("the backward of an in-place leaky_relu with a negative slope")
    return apply1("leaky_relu_grad", [g, x], {"slope": float(slope)})


@rule("abs", args="self")
def _abs(c, n):
    return ops.abs(c.arg(n, 0))


@rule("sgn", "sign", args="self")
def _sign(c, n):
    return ops.sign(c.arg(n, 0))


# --- masks: comparisons, logical ops, where, triangles, arange --------------------------------

@rule("eq", "ne", "lt", "le", "gt", "ge", args="self other")
def _compare(c, n):
    a, b = c.arg(n, 0), c.arg(n, 1)
    if not isinstance(a, Tensor):
        raise Unmapped("a number as the first operand")
    return ops.compare(a, c.short(n), b)


@rule("logical_and", "logical_or", "logical_xor", args="self other")
def _logical(c, n):
    return ops.logical(c.arg(n, 0), c.short(n).removeprefix("logical_"), c.arg(n, 1))


@rule("logical_not", args="self")
def _logical_not(c, n):
    return ops.logical_not(c.arg(n, 0))


@rule("bitwise_and", "bitwise_or", "bitwise_xor", args="self other")
def _bitwise(c, n):                     # `mask_a & mask_b` on bool masks
    a, b = c.arg(n, 0), c.arg(n, 1)
    if isinstance(b, bool):              # the .Scalar overload: a Python bool
        b = constant(np.array(b), dtype="bool")
    if not (isinstance(a, Tensor) and isinstance(b, Tensor) and a.dtype == b.dtype == "bool"):
        raise Unmapped("bitwise ops on integers (bool masks map)")
    return ops.logical(a, c.short(n).removeprefix("bitwise_"), b)


@rule("bitwise_not", args="self")
def _bitwise_not(c, n):
    if c.arg(n, 0).dtype != "bool":
        raise Unmapped("bitwise_not on integers (bool masks map)")
    return ops.logical_not(c.arg(n, 0))


def _tensor(v, dtype: str) -> Tensor:
    v = cast_to(v, dtype)
    return v if isinstance(v, Tensor) else scalar(v, dtype)


@rule("where", args="condition self other")
def _where(c, n):
    dt = c.spec(n)[1]
    cond = ops.cast(c.arg(n, 0), "bool")
    return ops.where(cond, _tensor(c.arg(n, 1), dt), _tensor(c.arg(n, 2), dt))


@rule("masked_fill", args="self mask value")
def _masked_fill(c, n):
    x, mask, value = c.arg(n, 0), c.arg(n, 1), c.arg(n, 2)
    return ops.where(ops.cast(mask, "bool"), _tensor(value, x.dtype), x)


@rule("tril", "triu", args="self diagonal")
def _tril(c, n):
    fn = ops.tril if c.short(n) == "tril" else ops.triu
    return fn(c.arg(n, 0), c.arg(n, 1, 0))


@rule("arange", args="start end step dtype")
def _arange(c, n):
    # No tensor input: its value is known now. PyTorch computes it once, here, on the CPU.
    kwargs = {k: v for k, v in n.kwargs.items() if k not in ("device", "pin_memory", "layout")}
    value = n.target(*n.args, **kwargs).numpy()
    return constant(value.copy(), dtype=str(value.dtype))


@rule("fill", args="self value")
def _fill(c, n):                         # every element set: x's values do not matter
    value = c.arg(n, 1)
    if isinstance(value, Tensor):
        raise Unmapped("a tensor fill value")
    shape, dtype = c.spec(n)
    return constant(np.full(shape, value, dtype=dtype), dtype=dtype)


# --- reductions -------------------------------------------------------------------------------

def _axes(x: Tensor, dims) -> tuple[int, ...]:
    if dims is None or (isinstance(dims, (list, tuple)) and not dims):
        return tuple(range(x.ndim))
    dims = [dims] if isinstance(dims, int) else dims
    return tuple(sorted(d % x.ndim for d in dims))


@rule("amax", args="self dim keepdim")
def _amax(c, n):                         # ties share the gradient, as PyTorch's amax
    x = c.arg(n, 0)
    return ops.max(x, axis=_axes(x, c.arg(n, 1, None)), keepdims=bool(c.arg(n, 2, False)))


@rule("var", args="self dim unbiased correction keepdim")
def _var(c, n):
    # sum((x - mean)^2) / (n - correction), made of ops minigraph has (PyTorch's backward
    # of var comes as elementwise ops in the joint graph).
    x = c.arg(n, 0)
    axes = _axes(x, c.named(n, "dim", None))
    corr = c.named(n, "correction", None)
    corr = (1 if c.named(n, "unbiased", True) else 0) if corr is None else corr
    count = int(np.prod([x.shape[a] for a in axes]))
    if count - corr <= 0:
        raise Unmapped(f"a variance of {count} elements with correction {corr}")
    d = ops.sub(x, ops.mean(x, axis=axes, keepdims=True))
    keep = bool(c.named(n, "keepdim", False))
    return ops.mul_scalar(ops.sum(ops.mul(d, d), axis=axes, keepdims=keep), 1.0 / (count - corr))


def logsumexp(x: Tensor, axes: tuple[int, ...], keepdim: bool) -> Tensor:
    """log(sum(exp(x))) over `axes`, shifted by the maximum (never exp of a large number)."""
    m = ops.max(x, axis=axes, keepdims=True)
    s = ops.add(ops.log(ops.sum(ops.exp(ops.sub(x, m)), axis=axes, keepdims=True)), m)
    return s if keepdim else ops.reshape(s, [d for k, d in enumerate(x.shape) if k not in axes])


@rule("logsumexp", args="self dim keepdim")
def _logsumexp(c, n):
    x = c.arg(n, 0)
    return logsumexp(x, _axes(x, c.arg(n, 1, None)), bool(c.arg(n, 2, False)))


# --- group norm -------------------------------------------------------------------------------

def _filled(w, channels: int, dtype: str, value: float):
    """An affine parameter, or `value` in each of `channels` when the layer has none."""
    return constant(np.full((channels,), value, dtype), dtype=dtype) if w is None else w


@rule("native_group_norm", args="input weight bias N C HxW group eps")
def _group_norm(c, n):
    x, w, b, _, channels, _, groups, eps = (c.arg(n, k) for k in range(8))
    w, b = _filled(w, channels, x.dtype, 1.0), _filled(b, channels, x.dtype, 0.0)
    return apply("group_norm", [x, w, b], {"groups": int(groups), "eps": float(eps)})


@rule("native_group_norm_backward",
      args="grad_out input mean rstd weight N C HxW group output_mask")
def _group_norm_backward(c, n):
    g, x, mean, rstd, w, _, channels = (c.arg(n, k) for k in range(7))
    w = _filled(w, channels, x.dtype, 1.0)
    return apply("group_norm_grad", [g, x, w, mean, rstd])


# --- losses -----------------------------------------------------------------------------------

_REDUCTION = {1: "mean", 2: "sum"}


def _reduction(r: int, what: str) -> str:
    if r not in _REDUCTION:
        raise Unmapped(f"{what} with reduction='none'")
    return _REDUCTION[r]


@rule("binary_cross_entropy_with_logits", args="self target weight pos_weight reduction")
def _bce(c, n):
    x, t, weight, pos_weight, r = (c.arg(n, k, d) for k, d in
                                   enumerate((None, None, None, None, 1)))
    if weight is not None or pos_weight is not None:
        raise Unmapped("weight or pos_weight")
    return ops.bce_with_logits(x, cast_to(t, x.dtype), _reduction(r, "binary_cross_entropy"))


@rule("smooth_l1_loss", args="self target reduction beta")
def _smooth_l1(c, n):
    x, t, r, beta = (c.arg(n, k, d) for k, d in enumerate((None, None, 1, 1.0)))
    return ops.smooth_l1(x, t, float(beta), _reduction(r, "smooth_l1_loss"))


@rule("smooth_l1_loss_backward", args="grad_output self target reduction beta")
def _smooth_l1_backward(c, n):
    g, x, t, r, beta = (c.arg(n, k) for k in range(5))
    return apply1("smooth_l1_grad", [g, x, t], {"beta": float(beta),
                                                "reduction": _reduction(r, "smooth_l1_loss")})


# --- attention: the fused CPU kernel, decomposed into the ops it is made of ------------------

def _attention_scale(q: Tensor, scale) -> float:
    return 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)


@rule("_scaled_dot_product_flash_attention_for_cpu",
      args="query key value dropout_p is_causal attn_mask scale")
def _attention(c, n):
    # softmax(q k^T * scale + mask) v [Vaswani 2017]; the mask is a bool "keep" mask or an
    # additive float one; is_causal keeps key j <= query i. Outputs: the result and the
    # log-sum-exp of each row of scores, which PyTorch's backward reads; here the backward
    # reads the probabilities instead (`c.stash`), so the log-sum-exp is made only if
    # something else reads it.
    q, k, v = (c.arg(n, i) for i in range(3))
    if c.arg(n, 3, 0.0):        # PyTorch's decomposition of the kernel draws its dropout
        raise Unmapped(f"attention with dropout_p={c.arg(n, 3)} (decomposed instead)")
    causal, mask = c.arg(n, 4, False), c.kwarg(n, "attn_mask", None)
    scale = _attention_scale(q, c.kwarg(n, "scale", None))
    s = ops.mul_scalar(ops.matmul(q, k, tb=True), scale)
    if mask is not None:
        s = ops.where(mask, s, scalar(-math.inf, s.dtype)) if mask.dtype == "bool" else \
            ops.add(s, cast_to(mask, s.dtype))
    if causal:
        rows, cols = s.shape[-2:]
        above = np.triu(np.full((rows, cols), -np.inf, dtype=s.dtype), 1)
        s = ops.add(s, constant(above, dtype=s.dtype))
    p = ops.softmax(s, axis=-1)
    out = ops.matmul(p, v)
    lse = logsumexp(s, (s.ndim - 1,), keepdim=False)
    c.stash[id(lse)] = (p, scale)
    return out, lse


@rule("_scaled_dot_product_flash_attention_for_cpu_backward",
      args="grad_out query key value out logsumexp dropout_p is_causal attn_mask scale")
def _attention_backward(c, n):
    g, q, k, v, _, lse = (c.arg(n, i) for i in range(6))
    if id(lse) not in c.stash:
        raise Unmapped("an attention backward whose forward was not mapped")
    p, scale = c.stash[id(lse)]
    dv = ops.matmul(p, g, ta=True)
    ds = apply1("softmax_grad", [ops.matmul(g, v, tb=True), p], {"axis": p.ndim - 1})
    ds = ops.mul_scalar(ds, scale)
    return ops.matmul(ds, k), ops.matmul(ds, q, ta=True), dv

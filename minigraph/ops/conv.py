"""Convolution and pooling on [N, C, H, W] tensors.

conv2d is im2col + one batched matrix multiply: the columns buffer (every receptive field
laid out as a column, C*kh*kw rows) is the op's *workspace*, declared so the memory report
counts it, and taken from `ctx.scratch`. Padding is never materialised: the columns of
out-of-image positions are zeros.

Every kernel here walks the kh*kw offsets of the window: for offset (i, j), output
position (oh, ow) reads input (oh*s - p + i, ow*s - p + j), a strided slice of the input.
`_span` gives the output range whose input position is inside the image.
"""

from __future__ import annotations

import numpy as np

from ..graph import Tensor, check_same_dtype
from . import cuda
from .nn import _float_only
from .registry import apply1, defop, itemsize, numel, shape_error


def _pair(v, what: str) -> tuple[int, int]:
    """An int or a pair of ints, as (h, w)."""
    if isinstance(v, (int, np.integer)):
        return int(v), int(v)
    if len(v) != 2:
        raise ValueError(f"{what} must be an int or a pair of ints, not {v!r}")
    return int(v[0]), int(v[1])


def _span(size: int, k: int, s: int, p: int, out: int, i: int) -> tuple[int, int, slice]:
    """Output positions [lo, hi) whose input position o*s - p + i lies in [0, size), and
    the input slice they read."""
    lo = max(0, -((i - p) // s))                        # ceil((p - i) / s)
    hi = max(lo, min(out, (size - 1 + p - i) // s + 1))
    start = lo * s - p + i
    return lo, hi, slice(start, start + max(hi - lo - 1, 0) * s + 1, s)


def _windows(attrs, x_shape, y_shape):
    """For each kernel offset (i, j): (i, j, output slices, input slices), non-empty only."""
    (kh, kw), (sh, sw), (ph, pw) = attrs["kernel"], attrs["stride"], attrs["padding"]
    H, W, Ho, Wo = x_shape[2], x_shape[3], y_shape[2], y_shape[3]
    out = []
    for i in range(kh):
        hlo, hhi, hs = _span(H, kh, sh, ph, Ho, i)
        for j in range(kw):
            wlo, whi, ws = _span(W, kw, sw, pw, Wo, j)
            if hhi > hlo and whi > wlo:
                out.append((i, j, (slice(None), slice(None), slice(hlo, hhi), slice(wlo, whi)),
                            (slice(None), slice(None), hs, ws)))
    return out


def _out_hw(op, operands, x_shape, kernel, stride, padding) -> tuple[int, int]:
    hw = []
    for n, k, s, p, axis in zip(x_shape[2:], kernel, stride, padding, "HW"):
        if s < 1 or p < 0 or k < 1:
            raise shape_error(op, operands, f"kernel {k}, stride {s}, padding {p} on {axis}: "
                              "need kernel >= 1, stride >= 1, padding >= 0")
        if n + 2 * p < k:
            raise shape_error(op, operands, f"kernel {k} is larger than the padded input "
                              f"{n + 2 * p} on {axis}")
        hw.append((n + 2 * p - k) // s + 1)
    return hw[0], hw[1]


def _im2col(xp, x, cols, attrs, y_shape, batch_inner: bool = False) -> None:
    """cols[N, C, kh, kw, Ho, Wo] = the input seen through every window (zeros in padding);
    with `batch_inner` the layout is [C, kh, kw, N, Ho, Wo] (the batch next to the pixels,
    so that conv2d_grad_w sums over images and pixels in one product).
    On a GPU one kernel does the same (`cuda.im2col`)."""
    if cuda.on_cupy(xp) and x.flags.c_contiguous:
        cuda.im2col(x, cols, attrs, y_shape, batch_inner)
        return
    if any(attrs["padding"]):
        cols.fill(0)
    if batch_inner:                   # the same copies, batch and channel axes swapped
        x = x.transpose(1, 0, 2, 3)
        cols = cols.transpose(0, 3, 1, 2, 4, 5)
    for i, j, osl, isl in _windows(attrs, x.shape, y_shape):
        cols[:, :, i, j][osl] = x[isl]


def _col2im(xp, dcols, dx, attrs, y_shape) -> None:
    """The adjoint of _im2col: add every column entry back to the input position it came from.
    Offsets are visited in a fixed order, so overlapping windows sum reproducibly.
    On a GPU one kernel gathers the same sums in the same order (`cuda.col2im`)."""
    if cuda.on_cupy(xp) and dcols.flags.c_contiguous and dx.flags.c_contiguous:
        cuda.col2im(dcols, dx, attrs, y_shape)
        return
    dx.fill(0)
    for i, j, osl, isl in _windows(attrs, dx.shape, y_shape):
        dst = dx[isl]
        xp.add(dst, dcols[:, :, i, j][osl], out=dst)


# --- conv2d --------------------------------------------------------------------------------------

def _conv_infer(attrs, x, w):
    ops = [x, w]
    dt = check_same_dtype("conv2d", x, w)
    _float_only("conv2d", x, w)
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise shape_error("conv2d", ops, "x must be [N,C,H,W] and w [O,C,kh,kw]")
    if x.shape[1] != w.shape[1]:
        raise shape_error("conv2d", ops, f"input channels {x.shape[1]} != weight channels "
                          f"{w.shape[1]}")
    if w.shape[0] == 0 or w.shape[1] == 0:   # a batch of 0 images is fine: zero outputs
        raise shape_error("conv2d", ops, "w needs at least one output and one input channel")
    ho, wo = _out_hw("conv2d", ops, x.shape, w.shape[2:], attrs["stride"], attrs["padding"])
    return [((x.shape[0], w.shape[0], ho, wo), dt)]


def _conv_attrs(attrs, w_shape) -> dict:
    return {**attrs, "kernel": tuple(w_shape[2:])}


def _conv_fw(ctx, attrs, ins, outs):
    x, w = ins
    y = outs[0]
    n, o = y.shape[:2]
    k, spatial = numel(w) // o, y.shape[2] * y.shape[3]
    cols = ctx.scratch((n,) + tuple(w.shape[1:]) + tuple(y.shape[2:]), x.dtype)
    _im2col(ctx.xp, x, cols, _conv_attrs(attrs, w.shape), y.shape)
    # y[n] = W[O, K] @ cols[n][K, Ho*Wo], for all n in one batched call
    cuda.matmul_into(ctx.xp, w.reshape(o, k), cols.reshape(n, k, spatial),
                     y.reshape(n, o, spatial))


def _cols_bytes(x_shape, w_shape, y_shape, itemsize) -> int:
    return (x_shape[0] * int(np.prod(w_shape[1:])) * y_shape[2] * y_shape[3]) * itemsize


def _conv_grad(attrs, ins, outs, g):
    x, w = ins
    base = {"stride": attrs["stride"], "padding": attrs["padding"]}
    dx = apply1("conv2d_grad_x", [g[0], w], {**base, "x_shape": tuple(x.shape)})
    dw = apply1("conv2d_grad_w", [g[0], x], {**base, "w_shape": tuple(w.shape)})
    return [dx, dw]


def _conv_grad_x_fw(ctx, attrs, ins, outs):
    # dcols[n] = W^T @ dy[n], then col2im: reads dy and w only.
    dy, w = ins
    dx = outs[0]
    n, o = dy.shape[:2]
    k, spatial = numel(w) // o, dy.shape[2] * dy.shape[3]
    dcols = ctx.scratch((n,) + tuple(w.shape[1:]) + tuple(dy.shape[2:]), dy.dtype)
    cuda.matmul_into(ctx.xp, w.reshape(o, k), dy.reshape(n, o, spatial),
                     dcols.reshape(n, k, spatial), ta=True)
    _col2im(ctx.xp, dcols, dx, _conv_attrs(attrs, w.shape), dy.shape)


def _conv_grad_w_fw(ctx, attrs, ins, outs):
    # dW[O, K] = sum over images and pixels of dy[n, O, p] cols[n, K, p]: one product over
    # the batch folded into the pixels, with dy's batch moved inside (dy_t [O, N, p]) and
    # the columns laid out batch inside ([K, N, p]). Reads dy and x only.
    xp, (dy, x), dw = ctx.xp, ins, outs[0]
    n, o = dy.shape[:2]
    k, spatial = numel(dw) // o, dy.shape[2] * dy.shape[3]
    cols = ctx.scratch(tuple(dw.shape[1:]) + (n,) + tuple(dy.shape[2:]), x.dtype)
    _im2col(xp, x, cols, _conv_attrs(attrs, dw.shape), dy.shape, batch_inner=True)
    dy_t = ctx.scratch((o, n, spatial), dy.dtype)
    dy_t[...] = dy.reshape(n, o, spatial).transpose(1, 0, 2)
    cuda.matmul_into(xp, dy_t.reshape(o, n * spatial), cols.reshape(k, n * spatial),
                     dw.reshape(o, k), tb=True)


def _gemm_flops(n, o, k, spatial) -> int:
    return 2 * n * o * k * spatial


defop("conv2d", infer=_conv_infer, forward=_conv_fw, grad=_conv_grad,
      flops=lambda a, ins, outs: _gemm_flops(outs[0].shape[0], outs[0].shape[1],
                                             numel(ins[1]) // ins[1].shape[0],
                                             outs[0].shape[2] * outs[0].shape[3]),
      workspace=lambda a, ins, outs: _cols_bytes(ins[0].shape, ins[1].shape, outs[0].shape,
                                                 itemsize(ins[0])))


def _conv_grad_x_infer(attrs, dy, w):
    return [(tuple(attrs["x_shape"]), dy.dtype)]


def _conv_grad_w_infer(attrs, dy, x):
    return [(tuple(attrs["w_shape"]), dy.dtype)]


defop("conv2d_grad_x", infer=_conv_grad_x_infer, forward=_conv_grad_x_fw, differentiable=(),
      flops=lambda a, ins, outs: _gemm_flops(ins[0].shape[0], ins[0].shape[1],
                                             numel(ins[1]) // ins[1].shape[0],
                                             ins[0].shape[2] * ins[0].shape[3]),
      workspace=lambda a, ins, outs: _cols_bytes(outs[0].shape, ins[1].shape, ins[0].shape,
                                                 itemsize(ins[0])))
defop("conv2d_grad_w", infer=_conv_grad_w_infer, forward=_conv_grad_w_fw, differentiable=(),
      flops=lambda a, ins, outs: _gemm_flops(ins[0].shape[0], ins[0].shape[1],
                                             numel(outs[0]) // outs[0].shape[0],
                                             ins[0].shape[2] * ins[0].shape[3]),
      workspace=lambda a, ins, outs: _cols_bytes(ins[1].shape, outs[0].shape, ins[0].shape,
                                                 itemsize(ins[0]))
      + numel(ins[0]) * itemsize(ins[0]))


def conv2d(x: Tensor, w: Tensor, stride=1, padding=0) -> Tensor:
    """Cross-correlation of x [N,C,H,W] with w [O,C,kh,kw] -> [N,O,Ho,Wo] (no bias: add one
    with broadcasting, e.g. `+ mg.reshape(b, (O, 1, 1))`)."""
    return apply1("conv2d", [x, w], {"stride": _pair(stride, "stride"),
                                     "padding": _pair(padding, "padding")})


# --- pooling -------------------------------------------------------------------------------------

def _pool_infer(op):
    def infer(attrs, x):
        _float_only(op, x)
        if len(x.shape) != 4:
            raise shape_error(op, [x], "x must be [N,C,H,W]")
        for k, p in zip(attrs["kernel"], attrs["padding"]):
            if 2 * p > k:
                raise shape_error(op, [x], f"padding {p} must be at most half the kernel {k}")
        ho, wo = _out_hw(op, [x], x.shape, attrs["kernel"], attrs["stride"], attrs["padding"])
        return [((x.shape[0], x.shape[1], ho, wo), x.dtype)]
    return infer


def _pool_attrs(kernel, stride, padding) -> dict:
    kernel = _pair(kernel, "kernel")
    return {"kernel": kernel, "stride": kernel if stride is None else _pair(stride, "stride"),
            "padding": _pair(padding, "padding")}


def _window_flops(attrs, ins, outs, per=1) -> int:
    kh, kw = attrs["kernel"]
    return per * kh * kw * numel(outs[0])


def _maxpool_fw(ctx, attrs, ins, outs):
    # Padding positions never win: start from -inf and take the maximum window offset by offset.
    xp, x, y = ctx.xp, ins[0], outs[0]
    y.fill(-np.inf)
    for _, _, osl, isl in _windows(attrs, x.shape, y.shape):
        dst = y[osl]
        xp.maximum(dst, x[isl], out=dst)


def _maxpool_grad_fw(ctx, attrs, ins, outs):
    """dx gets dy at the maximum of each window; tied maxima share it equally (as `max`).

    Two passes over the window offsets: count the maxima, then hand out the shares.
    """
    xp, (dy, x, y), dx = ctx.xp, ins, outs[0]
    wins = _windows(attrs, x.shape, y.shape)
    share = ctx.scratch(y.shape, y.dtype)
    eq = ctx.scratch(y.shape, y.dtype)
    share.fill(0)
    for _, _, osl, isl in wins:
        e = eq[osl]
        xp.equal(x[isl], y[osl], out=e)
        xp.add(share[osl], e, out=share[osl])
    xp.divide(dy, share, out=share)        # every window has at least one maximum
    dx.fill(0)
    for _, _, osl, isl in wins:
        e, dst = eq[osl], dx[isl]
        xp.equal(x[isl], y[osl], out=e)
        xp.multiply(e, share[osl], out=e)
        xp.add(dst, e, out=dst)


defop("max_pool2d", infer=_pool_infer("max_pool2d"), forward=_maxpool_fw,
      grad=lambda a, ins, outs, g: [apply1("max_pool2d_grad", [g[0], ins[0], outs[0]], a)],
      flops=_window_flops)
defop("max_pool2d_grad", infer=lambda a, dy, x, y: [(x.shape, dy.dtype)],
      forward=_maxpool_grad_fw, differentiable=(),
      flops=lambda a, ins, outs: _window_flops(a, ins, [ins[0]], per=4),
      workspace=lambda a, ins, outs: 2 * numel(ins[0]) * itemsize(ins[0]))


def _avgpool_fw(ctx, attrs, ins, outs):
    # Padding counts as zeros in the average (PyTorch's count_include_pad=True).
    xp, x, y = ctx.xp, ins[0], outs[0]
    kh, kw = attrs["kernel"]
    y.fill(0)
    for _, _, osl, isl in _windows(attrs, x.shape, y.shape):
        dst = y[osl]
        xp.add(dst, x[isl], out=dst)
    xp.divide(y, y.dtype.type(kh * kw), out=y)


def _avgpool_grad_fw(ctx, attrs, ins, outs):
    # Reads dy only: every input position gets dy / (kh*kw) from each window it is in.
    xp, dy, dx = ctx.xp, ins[0], outs[0]
    kh, kw = attrs["kernel"]
    dx.fill(0)
    for _, _, osl, isl in _windows(attrs, dx.shape, dy.shape):
        dst = dx[isl]
        xp.add(dst, dy[osl], out=dst)
    xp.divide(dx, dx.dtype.type(kh * kw), out=dx)


defop("avg_pool2d", infer=_pool_infer("avg_pool2d"), forward=_avgpool_fw,
      grad=lambda a, ins, outs, g: [apply1("avg_pool2d_grad", [g[0]],
                                           {**a, "x_shape": tuple(ins[0].shape)})],
      flops=_window_flops)
defop("avg_pool2d_grad", infer=lambda a, dy: [(tuple(a["x_shape"]), dy.dtype)],
      forward=_avgpool_grad_fw, differentiable=(),
      flops=lambda a, ins, outs: _window_flops(a, ins, [ins[0]]))


def max_pool2d(x: Tensor, kernel, stride=None, padding=0) -> Tensor:
    """Maximum over kernel windows of x [N,C,H,W]; stride defaults to the kernel."""
    return apply1("max_pool2d", [x], _pool_attrs(kernel, stride, padding))


def avg_pool2d(x: Tensor, kernel, stride=None, padding=0) -> Tensor:
    """Mean over kernel windows of x [N,C,H,W] (padding counts as zeros)."""
    return apply1("avg_pool2d", [x], _pool_attrs(kernel, stride, padding))

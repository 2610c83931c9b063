"""Grouped and dilated convolution: `conv2d_grouped`, the general form of conv2d.

With `groups` G the C input channels and O output channels split into G groups, and output
group g sees input group g only: w is [O, C/G, kh, kw]; G = C is a depthwise convolution
(MobileNets [Sandler 2018]). With dilation d the window's taps are d pixels apart, so a
3x3 kernel covers 5x5 at d = 2 [Yu 2016]. Each stays im2col plus one batched product, as
conv.py: the columns of group g are rows g*K .. (g+1)*K of the columns buffer, K =
C/G * kh * kw, and `w[g] @ cols[n, g]` for every image n and group g is one `matmul`.

A transposed convolution (`ConvTranspose2d`) needs no op of its own: it is the gradient
of a convolution with respect to its input, `conv2d_grouped_grad_x` (or conv2d's), read
forward [Dumoulin 2016]; the importer maps it so. A 1-d convolution is a 2-d one on a
height-1 image.
"""

from __future__ import annotations

import numpy as np

from ..graph import Tensor, check_same_dtype
from .conv import _gemm_flops, _pair, _span
from .nn import _float_only
from .registry import apply1, defop, itemsize, numel, shape_error


def _windows(attrs, x_shape, y_shape):
    """For each kernel tap (i, j): output slices and the input slices they read, where tap
    (i, j) of output (oh, ow) reads input (oh*s - p + i*d, ow*s - p + j*d)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = (attrs["kernel"], attrs["stride"],
                                              attrs["padding"], attrs["dilation"])
    H, W, Ho, Wo = x_shape[2], x_shape[3], y_shape[2], y_shape[3]
    out = []
    for i in range(kh):
        hlo, hhi, hs = _span(H, kh, sh, ph, Ho, i * dh)
        for j in range(kw):
            wlo, whi, ws = _span(W, kw, sw, pw, Wo, j * dw)
            if hhi > hlo and whi > wlo:
                out.append((i, j, (slice(None), slice(None), slice(hlo, hhi), slice(wlo, whi)),
                            (slice(None), slice(None), hs, ws)))
    return out


def _im2col(x, cols, attrs, y_shape) -> None:
    """cols[A, B, kh, kw, Ho, Wo] = x[A, B] seen through every window (zeros in padding)."""
    cols.fill(0)
    for i, j, osl, isl in _windows(attrs, x.shape, y_shape):
        cols[:, :, i, j][osl] = x[isl]


def _col2im(xp, dcols, dx, attrs, y_shape) -> None:
    """The adjoint of _im2col: add each column entry back where it came from, in a fixed
    order of taps (overlapping windows sum reproducibly)."""
    dx.fill(0)
    for i, j, osl, isl in _windows(attrs, dx.shape, y_shape):
        dst = dx[isl]
        xp.add(dst, dcols[:, :, i, j][osl], out=dst)


def _out_size(n, k, s, p, d) -> int:
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def _infer(attrs, x, w):
    ops, g = [x, w], attrs["groups"]
    dt = check_same_dtype("conv2d_grouped", x, w)
    _float_only("conv2d_grouped", x, w)
    if x.ndim != 4 or w.ndim != 4:
        raise shape_error("conv2d_grouped", ops, "x must be [N,C,H,W] and w [O,C/groups,kh,kw]")
    if g < 1 or x.shape[1] % g or w.shape[0] % g or x.shape[1] // g != w.shape[1]:
        raise shape_error("conv2d_grouped", ops, f"groups={g} must divide the input channels "
                          f"{x.shape[1]} and the output channels {w.shape[0]}, and w's second "
                          "axis must be the input channels per group")
    hw = []
    for n, k, s, p, d in zip(x.shape[2:], w.shape[2:], attrs["stride"], attrs["padding"],
                             attrs["dilation"]):
        if s < 1 or p < 0 or d < 1 or _out_size(n, k, s, p, d) < 1:
            raise shape_error("conv2d_grouped", ops, f"kernel {k}, stride {s}, padding {p}, "
                              f"dilation {d}: no output position on an axis of {n}")
        hw.append(_out_size(n, k, s, p, d))
    return [((x.shape[0], w.shape[0], *hw), dt)]


def _geometry(attrs, w_shape, x_shape, y_shape):
    """(groups, O/G, K, pixels) and the window attributes for this call."""
    g = attrs["groups"]
    k = int(np.prod(w_shape[1:]))
    return g, w_shape[0] // g, k, y_shape[2] * y_shape[3], {**attrs, "kernel": tuple(w_shape[2:])}


def _conv_fw(ctx, attrs, ins, outs):
    # y[n, g] = w[g] @ cols[n, g] for every image and group: one broadcast matmul.
    (x, w), y = ins, outs[0]
    g, og, k, p, win = _geometry(attrs, w.shape, x.shape, y.shape)
    n = x.shape[0]
    cols = ctx.scratch((n, x.shape[1]) + tuple(w.shape[2:]) + tuple(y.shape[2:]), x.dtype)
    _im2col(x, cols, win, y.shape)
    ctx.xp.matmul(w.reshape(g, og, k), cols.reshape(n, g, k, p), out=y.reshape(n, g, og, p))


def _grad_x_fw(ctx, attrs, ins, outs):
    # dcols[n, g] = w[g]^T @ dy[n, g], then col2im: reads dy and w only.
    (dy, w), dx = ins, outs[0]
    g, og, k, p, win = _geometry(attrs, w.shape, dx.shape, dy.shape)
    n = dy.shape[0]
    dcols = ctx.scratch((n, dx.shape[1]) + tuple(w.shape[2:]) + tuple(dy.shape[2:]), dy.dtype)
    ctx.xp.matmul(ctx.xp.swapaxes(w.reshape(g, og, k), -1, -2), dy.reshape(n, g, og, p),
                  out=dcols.reshape(n, g, k, p))
    _col2im(ctx.xp, dcols, dx, win, dy.shape)


def _grad_w_fw(ctx, attrs, ins, outs):
    # dw[g] = sum over images and pixels of dy[n, g] cols[n, g]^T: the columns laid out with
    # the batch inside ([C, kh, kw, N, Ho, Wo]) and dy as [O, N, pixels], one product per group.
    xp, (dy, x), dw = ctx.xp, ins, outs[0]
    g, og, k, p, win = _geometry(attrs, dw.shape, x.shape, dy.shape)
    n = dy.shape[0]
    cols = ctx.scratch((x.shape[1],) + tuple(dw.shape[2:]) + (n,) + tuple(dy.shape[2:]), x.dtype)
    _im2col(x.transpose(1, 0, 2, 3), cols.transpose(0, 3, 1, 2, 4, 5), win, dy.shape)
    dy_t = ctx.scratch((dy.shape[1], n, p), dy.dtype)
    dy_t[...] = dy.reshape(n, dy.shape[1], p).transpose(1, 0, 2)
    xp.matmul(dy_t.reshape(g, og, n * p), xp.swapaxes(cols.reshape(g, k, n * p), -1, -2),
              out=dw.reshape(g, og, k))


def _cols_bytes(x_shape, w_shape, y_shape, size) -> int:
    return x_shape[0] * x_shape[1] * int(np.prod(w_shape[2:])) * y_shape[2] * y_shape[3] * size


def _flops(x_shape, w_shape, y_shape) -> int:
    return _gemm_flops(y_shape[0], w_shape[0], int(np.prod(w_shape[1:])),
                       y_shape[2] * y_shape[3])


def _grad(attrs, ins, outs, g):
    x, w = ins
    dx = apply1("conv2d_grouped_grad_x", [g[0], w], {**attrs, "x_shape": tuple(x.shape)})
    dw = apply1("conv2d_grouped_grad_w", [g[0], x], {**attrs, "w_shape": tuple(w.shape)})
    return [dx, dw]


defop("conv2d_grouped", infer=_infer, forward=_conv_fw, grad=_grad,
      flops=lambda a, ins, outs: _flops(ins[0].shape, ins[1].shape, outs[0].shape),
      workspace=lambda a, ins, outs: _cols_bytes(ins[0].shape, ins[1].shape, outs[0].shape,
                                                 itemsize(ins[0])))
defop("conv2d_grouped_grad_x", infer=lambda a, dy, w: [(tuple(a["x_shape"]), dy.dtype)],
      forward=_grad_x_fw, differentiable=(),
      flops=lambda a, ins, outs: _flops(outs[0].shape, ins[1].shape, ins[0].shape),
      workspace=lambda a, ins, outs: _cols_bytes(outs[0].shape, ins[1].shape, ins[0].shape,
                                                 itemsize(ins[0])))
defop("conv2d_grouped_grad_w", infer=lambda a, dy, x: [(tuple(a["w_shape"]), dy.dtype)],
      forward=_grad_w_fw, differentiable=(),
      flops=lambda a, ins, outs: _flops(ins[1].shape, outs[0].shape, ins[0].shape),
      workspace=lambda a, ins, outs: _cols_bytes(ins[1].shape, outs[0].shape, ins[0].shape,
                                                 itemsize(ins[0]))
      + numel(ins[0]) * itemsize(ins[0]))


def conv2d_grouped(x: Tensor, w: Tensor, stride=1, padding=0, dilation=1,
                   groups: int = 1) -> Tensor:
    """Cross-correlation of x [N,C,H,W] with w [O, C/groups, kh, kw], its taps `dilation`
    apart, each output group reading its own input group -> [N,O,Ho,Wo] (PyTorch's
    `F.conv2d(x, w, None, stride, padding, dilation, groups)`)."""
    return apply1("conv2d_grouped", [x, w], {
        "stride": _pair(stride, "stride"), "padding": _pair(padding, "padding"),
        "dilation": _pair(dilation, "dilation"), "groups": int(groups)})

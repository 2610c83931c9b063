"""Group normalisation [Wu 2018]: the channels of each sample split into G groups, each
group normalised over its channels and pixels, then a per-channel scale and shift.

G = 1 is layer norm over (C, H, W); G = C is instance norm. Like layer norm (nn.py) it has
three outputs, y and the mean and 1/std of each (sample, group) that the gradient reads,
and does not depend on the batch: it trains the same at any batch size.
"""

from __future__ import annotations

from ..graph import Tensor
from .nn import _float_only, _norm_grad, _norm_params, standardize
from .registry import apply, defop, itemsize, numel, shape_error


def _gn_infer(attrs, x, gamma, beta):
    g = attrs["groups"]
    if x.ndim < 2 or g < 1 or x.shape[1] % g:
        raise shape_error("group_norm", [x, gamma, beta], f"x must be [N, C, ...] with C a "
                          f"multiple of groups={g}")
    if numel(x) == 0:
        raise shape_error("group_norm", [x, gamma, beta], "x has no elements")
    _norm_params("group_norm", x, gamma, beta, x.shape[1])
    stats = (x.shape[0], g)
    return [(x.shape, x.dtype), (stats, x.dtype), (stats, x.dtype)]


def _views(x, groups):
    """x as [N, G, elements per group] and as [N, C, pixels]."""
    n, c = x.shape[:2]
    return x.reshape(n, groups, -1), x.reshape(n, c, -1)


def _gn_fw(ctx, attrs, ins, outs):
    xp, (x, gamma, beta), (y, mean, rstd) = ctx.xp, ins, outs
    g = attrs["groups"]
    (x3, _), (y3, yc) = _views(x, g), _views(y, g)
    mu, rs = mean.reshape(-1, g, 1), rstd.reshape(-1, g, 1)
    standardize(xp, x3, y3, mu, rs, 2, attrs["eps"])
    xp.multiply(yc, gamma[:, None], out=yc)
    xp.add(yc, beta[:, None], out=yc)


def _gn_grad_fw(ctx, attrs, ins, outs):
    # With xh = (x - mean) * rstd and gy = dy * gamma, over each group:
    #   dx = rstd * (gy - mean(gy) - xh * mean(gy * xh)); dgamma, dbeta: sums per channel.
    # x is read once, first: dx may overwrite x.
    xp, (dy, x, gamma, mean, rstd), (dx, dgamma, dbeta) = ctx.xp, ins, outs
    g = mean.shape[1]                             # the statistics are [N, groups]
    (dx3, dxc), (x3, _), (_, dyc) = _views(dx, g), _views(x, g), _views(dy, g)
    if x is dx:
        x3 = dx3
    mu, rs = mean.reshape(-1, g, 1), rstd.reshape(-1, g, 1)
    t = ctx.scratch(dyc.shape, dy.dtype)
    t3 = t.reshape(dx3.shape)
    a = ctx.scratch(mu.shape, dy.dtype)
    b = ctx.scratch(mu.shape, dy.dtype)
    xp.subtract(x3, mu, out=dx3)
    xp.multiply(dx3, rs, out=dx3)                 # dx holds xh
    xp.sum(dyc, axis=(0, 2), out=dbeta)
    xp.multiply(dyc, dxc, out=t)
    xp.sum(t, axis=(0, 2), out=dgamma)
    xp.multiply(t, gamma[:, None], out=t)
    xp.mean(t3, axis=2, keepdims=True, out=b)     # mean(gy * xh)
    xp.multiply(dyc, gamma[:, None], out=t)
    xp.mean(t3, axis=2, keepdims=True, out=a)     # mean(gy)
    xp.multiply(dx3, b, out=dx3)
    xp.subtract(t3, dx3, out=dx3)
    xp.subtract(dx3, a, out=dx3)
    xp.multiply(dx3, rs, out=dx3)


def _gn_grad_infer(attrs, dy, x, gamma, mean, rstd):
    return [(x.shape, x.dtype), (gamma.shape, x.dtype), (gamma.shape, x.dtype)]


defop("group_norm", infer=_gn_infer, forward=_gn_fw, grad=_norm_grad("group_norm_grad"),
      flops=lambda a, ins, outs: 8 * numel(ins[0]))
defop("group_norm_grad", infer=_gn_grad_infer, forward=_gn_grad_fw, inplace=((0, 1),),
      differentiable=(), flops=lambda a, ins, outs: 12 * numel(ins[0]),
      workspace=lambda a, ins, outs: (numel(ins[0]) + 2 * numel(ins[3])) * itemsize(ins[0]))


def group_norm(x: Tensor, groups: int, gamma: Tensor, beta: Tensor,
               eps: float = 1e-5) -> Tensor:
    """`nn.GroupNorm(groups, C)` on x [N, C, ...]: each sample's channels in `groups`
    groups, each normalised over its channels and pixels (biased variance), then gamma
    and beta per channel."""
    _float_only("group_norm", x)
    return apply("group_norm", [x, gamma, beta], {"groups": int(groups), "eps": float(eps)})[0]

"""Ops that pick values without arithmetic: basic indexing, concat, and the max reduction.

Their gradients are *scatters*: each output gradient goes back to the position the forward
pass read it from, and every other position gets zero. `x[1:, ::2]` on a `Tensor` calls
`getitem`; its gradient is a `getitem_grad` node that writes `g` into a zeroed buffer of
x's shape. None of these gradient nodes reads x itself except max's, which must find
where the maxima were.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence

import numpy as np

from ..graph import Tensor, check_same_dtype
from .registry import apply1, defop, itemsize, numel, shape_error
from .shape import _norm_axes, _reduced_shape

# --- getitem: basic indexing (ints, slices with steps, Ellipsis) ------------------------------

def _canonical_index(x: Tensor, idx) -> tuple:
    """One entry per axis of x: ("i", k) for an int, ("s", start, step, count) for a slice.

    Plain tuples of ints, so the index is a printable, hashable node attribute.
    """
    if not isinstance(idx, tuple):
        idx = (idx,)
    for i in idx:
        ok = i is Ellipsis or isinstance(i, builtins.slice) or (
            isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)))
        if not ok:
            raise shape_error("getitem", [x], f"index {i!r} is not supported: only ints, "
                              "slices and '...' (basic indexing)")
    n_ell = builtins.sum(1 for i in idx if i is Ellipsis)
    if n_ell > 1:
        raise shape_error("getitem", [x], "an index can have only one '...'")
    n_real = len(idx) - n_ell
    if n_real > len(x.shape):
        raise shape_error("getitem", [x], f"too many indices ({n_real}) for "
                          f"{len(x.shape)} dims")
    fill = (builtins.slice(None),) * (len(x.shape) - n_real)
    if n_ell:
        k = idx.index(Ellipsis)
        idx = idx[:k] + fill + idx[k + 1:]
    else:
        idx = idx + fill
    entries = []
    for axis, (i, n) in enumerate(zip(idx, x.shape)):
        if isinstance(i, builtins.slice):
            if i.step == 0:
                raise shape_error("getitem", [x], f"slice step cannot be zero (axis {axis})")
            start, stop, step = i.indices(n)
            entries.append(("s", start, step, len(range(start, stop, step))))
        else:
            k = int(i)
            if not -n <= k < n:
                raise shape_error("getitem", [x], f"index {k} is out of range for axis "
                                  f"{axis} of size {n}")
            entries.append(("i", k % n))
    return tuple(entries)


def _np_index(entries: tuple) -> tuple:
    """The canonical index as an index NumPy and CuPy understand (a view, never a copy)."""
    out = []
    for e in entries:
        if e[0] == "i":
            out.append(e[1])
        else:
            _, start, step, count = e
            stop = start + step * count
            out.append(builtins.slice(start, None if stop < 0 else stop, step))
    return tuple(out)


def _index_shape(entries: tuple) -> tuple[int, ...]:
    return tuple(e[3] for e in entries if e[0] == "s")


def _getitem_infer(attrs, x):
    return [(_index_shape(attrs["index"]), x.dtype)]


def _getitem_fw(ctx, attrs, ins, outs):
    outs[0][...] = ins[0][_np_index(attrs["index"])]


def _getitem_grad(attrs, ins, outs, g):
    return [apply1("getitem_grad", [g[0]], {"index": attrs["index"],
                                            "shape": tuple(ins[0].shape)})]


defop("getitem", infer=_getitem_infer, forward=_getitem_fw, grad=_getitem_grad,
      flops=lambda a, i, o: 0)


def _getitem_grad_infer(attrs, g):
    if _index_shape(attrs["index"]) != g.shape:
        raise shape_error("getitem_grad", [g], f"gradient shape does not match the index "
                          f"(expected {list(_index_shape(attrs['index']))})")
    return [(tuple(attrs["shape"]), g.dtype)]


def _getitem_grad_fw(ctx, attrs, ins, outs):
    # Scatter into zeros: the positions the forward pass did not read get no gradient.
    outs[0].fill(0)
    outs[0][_np_index(attrs["index"])] = ins[0]


defop("getitem_grad", infer=_getitem_grad_infer, forward=_getitem_grad_fw,
      differentiable=(), flops=lambda a, i, o: 0)


def getitem(x: Tensor, idx) -> Tensor:
    """`x[idx]` for basic indexing: ints, slices (any step) and `...`. A copy, not a view."""
    entries = _canonical_index(x, idx)
    if all(e == ("s", 0, 1, n) for e, n in zip(entries, x.shape)):
        return x                       # x[...] and x[:] select everything: no node
    return apply1("getitem", [x], {"index": entries})


def slice(x: Tensor, axis: int, start: int | None = None, stop: int | None = None,  # noqa: A001
          step: int | None = None) -> Tensor:
    """`x[..., start:stop:step, ...]` along one axis."""
    if not -len(x.shape) <= axis < len(x.shape):
        raise shape_error("slice", [x], f"axis {axis} out of range for {len(x.shape)} dims")
    idx = [builtins.slice(None)] * len(x.shape)
    idx[axis % len(x.shape)] = builtins.slice(start, stop, step)
    return getitem(x, tuple(idx))


# --- concat -----------------------------------------------------------------------------------

def _concat_infer(attrs, *xs):
    dt = check_same_dtype("concat", *xs)
    nd = len(xs[0].shape)
    if any(len(x.shape) != nd for x in xs):
        raise shape_error("concat", xs, "operands must have the same number of dims")
    axis = attrs["axis"]
    for x in xs[1:]:
        for d in range(nd):
            if d != axis and x.shape[d] != xs[0].shape[d]:
                raise shape_error("concat", xs, f"sizes differ on axis {d} "
                                  f"({xs[0].shape[d]} != {x.shape[d]}); only axis {axis} "
                                  "may differ")
    shape = list(xs[0].shape)
    shape[axis] = builtins.sum(x.shape[axis] for x in xs)
    return [(tuple(shape), dt)]


def _concat_fw(ctx, attrs, ins, outs):
    axis, off = attrs["axis"], 0
    lead = (builtins.slice(None),) * axis
    for x in ins:
        n = x.shape[axis]
        outs[0][lead + (builtins.slice(off, off + n),)] = x
        off += n


def _concat_grad(attrs, ins, outs, g):
    # Split the gradient back: input k gets its own stretch of g along the axis.
    grads, off = [], 0
    for x in ins:
        n = x.shape[attrs["axis"]]
        grads.append(slice(g[0], attrs["axis"], off, off + n))
        off += n
    return grads


defop("concat", infer=_concat_infer, forward=_concat_fw, grad=_concat_grad,
      flops=lambda a, i, o: 0)


def concat(xs: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Join tensors along `axis`; every other axis must agree."""
    xs = list(xs)
    if not xs:
        raise ValueError("concat needs at least one tensor")
    nd = len(xs[0].shape)
    if not -nd <= axis < nd:
        raise shape_error("concat", xs, f"axis {axis} out of range for {nd} dims")
    if len(xs) == 1:
        return xs[0]
    return apply1("concat", xs, {"axis": axis % nd})


# --- max: a reduction whose gradient goes to the positions of the maximum -----------------------

def _max_infer(attrs, x):
    axes = tuple(attrs["axes"])
    if any(x.shape[a] == 0 for a in axes):
        raise shape_error("max", [x], "max of an empty axis")
    return [(_reduced_shape(x.shape, axes, attrs["keepdims"]), x.dtype)]


def _max_fw(ctx, attrs, ins, outs):
    x, axes = ins[0], tuple(attrs["axes"])
    ctx.xp.max(x, axis=axes, out=outs[0].reshape(_reduced_shape(x.shape, axes, False)))


def _max_grad(attrs, ins, outs, g):
    # The gradient needs x and y (where x == y); nothing else of the forward pass.
    return [apply1("max_grad", [g[0], ins[0], outs[0]],
                   {"axes": attrs["axes"], "keepdims": attrs["keepdims"]})]


defop("max", infer=_max_infer, forward=_max_fw, grad=_max_grad,
      flops=lambda a, ins, outs: numel(ins[0]))


def _max_grad_infer(attrs, dy, x, y):
    return [(x.shape, dy.dtype)]


def _max_grad_fw(ctx, attrs, ins, outs):
    """dx = dy / (number of maxima) where x equals its maximum, else 0.

    Ties share equally: a deterministic rule that needs no argmax and matches torch.amax.
    """
    xp = ctx.xp
    dy, x, y = ins
    dx, axes = outs[0], tuple(attrs["axes"])
    kshape = _reduced_shape(x.shape, axes, True)
    xp.equal(x, y.reshape(kshape), out=dx)          # 1 at every maximum (x read, then dx)
    share = ctx.scratch(kshape, dx.dtype)
    xp.sum(dx, axis=axes, keepdims=True, out=share)  # how many maxima per reduced slot
    xp.divide(dy.reshape(kshape), share, out=share)
    xp.multiply(dx, share, out=dx)


defop("max_grad", infer=_max_grad_infer, forward=_max_grad_fw, inplace=((0, 1),),
      differentiable=(), flops=lambda a, ins, outs: 3 * numel(ins[1]),
      workspace=lambda a, ins, outs: numel(ins[0]) * itemsize(ins[0]))


def max(x: Tensor, axis=None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Largest element over `axis` (all axes by default). Its gradient is shared equally by
    tied maxima."""
    return apply1("max", [x], {"axes": _norm_axes("max", x, axis), "keepdims": bool(keepdims)})

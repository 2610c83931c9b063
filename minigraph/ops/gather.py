"""Indexing by tensors of indices: gather, scatter, take (`index_select`), advanced indexing
(`x[i, j]`) and its put, flip, cumulative sum, sort and top-k.

`getitem` (indexing.py) reads positions fixed in the graph; these read positions held in an
integer tensor, as PyTorch's `gather`, `scatter_add`, `index_select`, `index` and
`index_put` do. Each gradient is the adjoint scatter or gather: what `gather` read from a
position goes back to it (`gather_grad`, an add into zeros, so a position read twice gets
both), and a scatter's gradient is a gather of the output gradient. Index inputs take no
gradient and are declared to the executor (`index_inputs`), so a GPU run checks them on the
host. Sort and top-k have two outputs, the values (with a gradient: a scatter back to where
each came from) and int64 indices; ties are kept in their input order (a stable sort), where
PyTorch's default sort is free to order them otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import DTypeError
from ..graph import Tensor
from .broadcast import sum_to
from .registry import apply, apply1, defop, numel, shape_error


def _ints(op: str, *ts: Tensor) -> None:
    for t in ts:
        if np.dtype(t.dtype).kind not in "iu":
            raise DTypeError(f"{op}({t.name}[{t.dtype}]): indices must be integers")


def _along(xp, idx, axis: int) -> tuple:
    """The index tuple that reads x[..., idx[i, j, k], ...] at axis `axis` and i, j, k
    elsewhere (PyTorch's gather/scatter addressing)."""
    nd = idx.ndim
    return tuple(idx if d == axis else
                 xp.arange(idx.shape[d]).reshape([-1 if e == d else 1 for e in range(nd)])
                 for d in range(nd))


def _add_at(xp, out, index, values) -> None:
    """out[index] += values, repeated positions summed (NumPy's and CuPy's `add.at`)."""
    xp.add.at(out, index, values)


def _check_along(op: str, x: Tensor, idx: Tensor, axis: int) -> None:
    _ints(op, idx)
    if idx.ndim != x.ndim or not 0 <= axis < x.ndim or any(
            i > s for d, (i, s) in enumerate(zip(idx.shape, x.shape)) if d != axis):
        raise shape_error(op, [x, idx], f"indices along axis {axis} must have x's number of "
                          "axes and no larger sizes on the others")


def _bound(axis_of: str):
    """index_inputs: the index input must stay below x's size along the axis."""
    return lambda a, ins: {1: int(ins[0].shape[a[axis_of]])}


# --- gather and its gradient ------------------------------------------------------------------

def _gather_infer(a, x, idx):
    _check_along("gather", x, idx, a["axis"])
    return [(tuple(idx.shape), x.dtype)]


def _temp_out(a, ins, outs) -> int:
    """The gathered values are made, then copied into the output: one output's bytes."""
    return numel(outs[0]) * np.dtype(outs[0].dtype).itemsize


defop("gather", infer=_gather_infer, differentiable=(0,), flops=lambda a, i, o: 0,
      workspace=_temp_out,
      forward=lambda ctx, a, ins, outs: outs[0].__setitem__(
          ..., ins[0][_along(ctx.xp, ins[1], a["axis"])]),
      grad=lambda a, ins, outs, g: [
          apply1("gather_grad", [g[0], ins[1]], {"axis": a["axis"], "shape": ins[0].shape}),
          None],
      index_inputs=_bound("axis"))


def _gather_grad_fw(ctx, a, ins, outs):
    outs[0].fill(0)
    _add_at(ctx.xp, outs[0], _along(ctx.xp, ins[1], a["axis"]), ins[0])


defop("gather_grad", infer=lambda a, g, idx: [(tuple(a["shape"]), g.dtype)],
      forward=_gather_grad_fw, differentiable=(0,),
      grad=lambda a, ins, outs, g: [gather(g[0], a["axis"], ins[1]), None])


def gather(x: Tensor, axis: int, idx: Tensor) -> Tensor:
    """out[i, j] = x[idx[i, j], j] for axis 0 (PyTorch's `torch.gather`)."""
    return apply1("gather", [x, idx], {"axis": axis % x.ndim})


# --- scatter and scatter_add: x with src written (added) at idx ---------------------------

def _scatter_infer(a, x, idx, src):
    _check_along(a["mode"], x, idx, a["axis"])
    if tuple(src.shape) != tuple(idx.shape) or src.dtype != x.dtype:
        raise shape_error(a["mode"], [x, idx, src], "src must have the indices' shape and "
                          "x's dtype")
    return [(tuple(x.shape), x.dtype)]


def _scatter_fw(ctx, a, ins, outs):
    x, idx, src = ins
    out = outs[0]
    if out is not x:
        ctx.xp.copyto(out, x)
    where = _along(ctx.xp, idx, a["axis"])
    if a["mode"] == "scatter_add":
        _add_at(ctx.xp, out, where, src)
    else:
        out[where] = src


def _scatter_grad(a, ins, outs, g):
    x, idx, src = ins
    dx = g[0]
    if a["mode"] == "scatter":      # overwritten positions do not reach x
        zero = apply1("gather", [g[0], idx], {"axis": a["axis"]})
        dx = scatter(g[0], a["axis"], idx, apply1("zeros_like_of", [zero]), "scatter")
    return [dx, None, gather(g[0], a["axis"], idx)]


defop("scatter", infer=_scatter_infer, forward=_scatter_fw, grad=_scatter_grad,
      inplace=((0, 0),), differentiable=(0, 2), flops=lambda a, i, o: numel(i[2]),
      index_inputs=_bound("axis"))
defop("zeros_like_of", infer=lambda a, x: [(tuple(x.shape), x.dtype)], differentiable=(),
      forward=lambda ctx, a, ins, outs: outs[0].fill(0), flops=lambda a, i, o: 0)


def scatter(x: Tensor, axis: int, idx: Tensor, src: Tensor, mode: str = "scatter") -> Tensor:
    """x with src written ("scatter") or added ("scatter_add") at idx along `axis`:
    out[idx[i, j], j] = src[i, j] for axis 0 (PyTorch's `scatter`, `scatter_add`)."""
    return apply1("scatter", [x, idx, src], {"axis": axis % x.ndim, "mode": mode})


# --- take (index_select): whole slices of x picked along one axis ---------------------------

def _take_infer(a, x, idx):
    _ints("take", idx)
    if idx.ndim != 1:
        raise shape_error("take", [x, idx], "indices must be 1-d")
    shape = list(x.shape)
    shape[a["axis"]] = idx.shape[0]
    return [(tuple(shape), x.dtype)]


def _take_grad_fw(ctx, a, ins, outs):
    g, idx = ins
    outs[0].fill(0)
    where = (slice(None),) * a["axis"] + (idx,)
    _add_at(ctx.xp, outs[0], where, g)


defop("take", infer=_take_infer, differentiable=(0,), flops=lambda a, i, o: 0,
      forward=lambda ctx, a, ins, outs: ctx.xp.take(ins[0], ins[1], axis=a["axis"],
                                                    out=outs[0]),
      grad=lambda a, ins, outs, g: [
          apply1("take_grad", [g[0], ins[1]], {"axis": a["axis"], "shape": ins[0].shape}),
          None],
      index_inputs=_bound("axis"))
defop("take_grad", infer=lambda a, g, idx: [(tuple(a["shape"]), g.dtype)],
      forward=_take_grad_fw, differentiable=(0,),
      grad=lambda a, ins, outs, g: [take(g[0], a["axis"], ins[1]), None])


def take(x: Tensor, axis: int, idx: Tensor) -> Tensor:
    """The slices x[..., idx[k], ...] along `axis` (PyTorch's `index_select`)."""
    return apply1("take", [x, idx], {"axis": axis % x.ndim})


# --- advanced indexing: x[i, :, j] with index tensors, and its put ------------------------

def _np_where(xp, where: Sequence[bool], idx: Sequence) -> tuple:
    it = iter(idx)
    return tuple(next(it) if w else slice(None) for w in where)


def _index_shape(x: Tensor, where, idx: Sequence[Tensor]) -> tuple[int, ...]:
    probe = np.broadcast_to(np.zeros((), np.int8), x.shape)
    return probe[_np_where(np, where, [np.zeros(t.shape, np.intp) for t in idx])].shape


def _index_infer(a, x, *idx):
    _ints("index", *idx)
    if len(a["where"]) > x.ndim or sum(a["where"]) != len(idx):
        raise shape_error("index", [x, *idx], "one index tensor per True in `where`")
    return [(_index_shape(x, a["where"], idx), x.dtype)]


def _index_grad_fw(ctx, a, ins, outs):
    outs[0].fill(0)
    _add_at(ctx.xp, outs[0], _np_where(ctx.xp, a["where"], ins[1:]), ins[0])


defop("index", infer=_index_infer, differentiable=(0,), flops=lambda a, i, o: 0,
      workspace=_temp_out,
      forward=lambda ctx, a, ins, outs: outs[0].__setitem__(
          ..., ins[0][_np_where(ctx.xp, a["where"], ins[1:])]),
      grad=lambda a, ins, outs, g: [
          apply1("index_grad", [g[0], *ins[1:]], {"where": a["where"],
                                                  "shape": ins[0].shape}),
          *([None] * (len(ins) - 1))])
defop("index_grad", infer=lambda a, g, *idx: [(tuple(a["shape"]), g.dtype)],
      forward=_index_grad_fw, differentiable=(0,),
      grad=lambda a, ins, outs, g: [index(g[0], a["where"], list(ins[1:])),
                                    *([None] * (len(ins) - 1))])


def index(x: Tensor, where: Sequence[bool], idx: Sequence[Tensor]) -> Tensor:
    """x[i, :, j]: `where[d]` says whether axis d is indexed by the next tensor of `idx`
    (NumPy's and PyTorch's advanced indexing, index tensors broadcast together)."""
    return apply1("index", [x, *idx], {"where": tuple(bool(w) for w in where)})


def _index_put_infer(a, x, v, *idx):
    _ints("index_put", *idx)
    shape = _index_shape(x, a["where"], idx)
    if v.dtype != x.dtype or np.broadcast_shapes(tuple(v.shape), shape) != shape:
        raise shape_error("index_put", [x, v, *idx], f"values must broadcast to "
                          f"{list(shape)} in x's dtype")
    return [(tuple(x.shape), x.dtype)]


def _index_put_fw(ctx, a, ins, outs):
    x, v, *idx = ins
    out = outs[0]
    if out is not x:
        ctx.xp.copyto(out, x)
    where = _np_where(ctx.xp, a["where"], idx)
    if a["accumulate"]:
        _add_at(ctx.xp, out, where, ctx.xp.broadcast_to(v, out[where].shape))
    else:
        out[where] = v


def _index_put_grad(a, ins, outs, g):
    x, v, *idx = ins
    picked = index(g[0], a["where"], idx)
    dx = g[0]
    if not a["accumulate"]:
        dx = index_put(g[0], a["where"], idx, apply1("zeros_like_of", [picked]), False)
    return [dx, sum_to(picked, v.shape), *([None] * len(idx))]


defop("index_put", infer=_index_put_infer, forward=_index_put_fw, grad=_index_put_grad,
      inplace=((0, 0),), differentiable=(0, 1), flops=lambda a, i, o: numel(i[1]))


def index_put(x: Tensor, where: Sequence[bool], idx: Sequence[Tensor], v: Tensor,
              accumulate: bool) -> Tensor:
    """x with v written (added, when `accumulate`) at x[i, :, j] (PyTorch's `index_put`)."""
    return apply1("index_put", [x, v, *idx], {"where": tuple(bool(w) for w in where),
                                              "accumulate": bool(accumulate)})


# --- flip and cumulative sum --------------------------------------------------------------

defop("flip", infer=lambda a, x: [(tuple(x.shape), x.dtype)], flops=lambda a, i, o: 0,
      forward=lambda ctx, a, ins, outs: ctx.xp.copyto(outs[0], ctx.xp.flip(ins[0], a["axes"])),
      grad=lambda a, ins, outs, g: [flip(g[0], a["axes"])])


def flip(x: Tensor, axes: Sequence[int]) -> Tensor:
    """x reversed along `axes` (a copy)."""
    return apply1("flip", [x], {"axes": tuple(sorted(d % x.ndim for d in axes))})


defop("cumsum", infer=lambda a, x: [(tuple(x.shape), x.dtype)],
      forward=lambda ctx, a, ins, outs: ctx.xp.cumsum(ins[0], axis=a["axis"], out=outs[0]),
      grad=lambda a, ins, outs, g: [
          flip(cumsum(flip(g[0], (a["axis"],)), a["axis"]), (a["axis"],))])


def cumsum(x: Tensor, axis: int) -> Tensor:
    """Running sums along `axis`; its gradient is the running sum from the other end."""
    return apply1("cumsum", [x], {"axis": axis % x.ndim})


# --- sort and top-k: values and int64 indices -----------------------------------------------

def _sort_infer(a, x):
    shape = list(x.shape)
    shape[a["axis"]] = a.get("k") or shape[a["axis"]]
    if not 0 < shape[a["axis"]] <= x.shape[a["axis"]]:
        raise shape_error("sort", [x], f"k={a.get('k')} outside 1..{x.shape[a['axis']]}")
    return [(tuple(shape), x.dtype), (tuple(shape), "int64")]


def _sort_fw(ctx, a, ins, outs):
    xp, x, axis = ctx.xp, ins[0], a["axis"]
    order = xp.argsort(-x if a["descending"] else x, axis=axis, kind="stable")
    k = a.get("k") or x.shape[axis]
    order = xp.take(order, xp.arange(k), axis=axis)
    outs[1][...] = order
    outs[0][...] = xp.take_along_axis(x, order, axis=axis)


def _sort_grad(a, ins, outs, g):
    return [apply1("gather_grad", [g[0], outs[1]], {"axis": a["axis"],
                                                    "shape": ins[0].shape})]


defop("sort", infer=_sort_infer, forward=_sort_fw, grad=_sort_grad,
      flops=lambda a, i, o: numel(i[0]) * max(1, int(np.log2(max(2, i[0].shape[a["axis"]])))),
      workspace=lambda a, i, o: numel(i[0]) * (24 + 2 * np.dtype(i[0].dtype).itemsize))


def sort(x: Tensor, axis: int = -1, descending: bool = False,
         k: int | None = None) -> tuple[Tensor, Tensor]:
    """(values, int64 indices) of x sorted along `axis`, ties in input order; with k, the
    first k only (`topk` is `sort(x, axis, descending=True, k=k)`)."""
    attrs = {"axis": axis % x.ndim, "descending": bool(descending)}
    if k is not None:
        attrs["k"] = int(k)
    values, indices = apply("sort", [x], attrs)
    return values, indices

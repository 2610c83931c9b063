"""ATen ops to minigraph ops: one small rule per ATen op of the joint graph.

Each rule gets the converter (`c`) and the FX node and returns the minigraph value(s) of
that node's output(s): one `Tensor`, a tuple for several outputs, `None` for an output
PyTorch leaves undefined. A rule that cannot express this particular call (a loss with
class weights, a 3-d convolution) raises `Unmapped` with the reason, and the node becomes
an `opaque` node instead (see `minigraph.ops.opaque`).

Every rule declares the arguments it honours (`@rule(..., args="self other alpha")`): it
reads each of them and obeys it, or refuses the call. Before a rule runs, the converter
checks the node's other arguments (`unhonoured`): one set away from its schema default
makes the node opaque, naming it. So a rule never maps a call whose meaning it has not
read: `div(a, b, rounding_mode="floor")` cannot pass as a plain division. A test walks
every rule's declaration against ATen's schemas.

View ops (view, t, permute, expand, slice, ...) become minigraph's copying ops: minigraph
gives every tensor its own buffer, so PyTorch's aliasing is not kept; the converter counts
the bytes so the report can say how much. More rules (masks, more activations, grouped
and transposed convolutions, group norm, more losses, attention) are in `aten_more.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import ops
from ..graph import Tensor, constant
from ..ops.registry import apply, apply1


class Unmapped(Exception):
    """This call of the ATen op has no minigraph equivalent; the message says why."""


class Dropped:
    """An output the import does not keep (a running statistic's new value); reading it fails."""

    def __init__(self, what: str):
        self.what = what


class PoolIndices:
    """max_pool2d's int64 indices: minigraph's max_pool2d_grad rereads x and y instead."""

    def __init__(self, y: Tensor, x: Tensor):
        self.y, self.x = y, x


RULES: dict[str, Callable[[Any, Any], Any]] = {}
ARGS: dict[str, frozenset[str]] = {}      # ATen op name -> the arguments its rule honours
#: Arguments that never change an op's values, only where and how its result is stored.
NEUTRAL = frozenset({"layout", "device", "pin_memory", "memory_format", "non_blocking"})


def is_view(n: Any) -> bool:
    """Whether ATen's schema says the op's output aliases its first input (`Tensor(a)`)."""
    schema = getattr(n.target, "_schema", None)
    if schema is None or not schema.returns or not schema.arguments:
        return False
    ret, first = schema.returns[0].alias_info, schema.arguments[0].alias_info
    return ret is not None and not ret.is_write and first is not None and \
        bool(set(ret.before_set) & set(first.before_set))


def rule(*names: str, args: str):
    """Register the decorated function as the rule of the ATen ops `names` (overloads
    included); `args` names, space-separated, every schema argument the rule honours."""
    honours = frozenset(args.split())

    def deco(fn):
        for n in names:
            RULES[n], ARGS[n] = fn, honours
        return fn
    return deco


def _at_default(value: Any, default: Any) -> bool:
    if default is None or value is None:
        return value is default
    if isinstance(default, (list, tuple)):
        if not isinstance(value, (list, tuple)):
            return False
        if len(default) == 1 and len(value) > 1:      # `int[2] dilation=1` reads as [1, 1]
            return all(_at_default(v, default[0]) for v in value)
        return len(value) == len(default) and all(map(_at_default, value, default))
    return type(value) in (bool, int, float, str) and value == default


def unhonoured(n: Any, short: str) -> str | None:
    """Why node `n` may not go through the rule of `short`: an argument the rule does not
    honour, set away from its default (or one without a default); None when there is none."""
    honours = ARGS.get(short, frozenset()) | NEUTRAL
    for k, a in enumerate(n.target._schema.arguments):
        if a.name in honours:
            continue
        if k < len(n.args) and not a.kwarg_only:
            value = n.args[k]
        elif a.name in n.kwargs:
            value = n.kwargs[a.name]
        else:
            continue                                  # left at its default
        if a.has_default_value() and _at_default(value, a.default_value):
            continue
        shown = f"a tensor ({value.name})" if hasattr(value, "op") else repr(value)
        default = f"its default {a.default_value!r}" if a.has_default_value() else "no default"
        return (f"argument {a.name}={shown} of {n.target} is not honoured by the mapping "
                f"(it reads {', '.join(sorted(ARGS.get(short, ()))) or 'nothing'}; "
                f"{a.name} has {default})")
    return None


def cast_to(x: Any, dtype: str) -> Any:
    """A tensor operand in `dtype` (PyTorch's type promotion already chose the output's), or
    a Python number as it is."""
    return ops.cast(x, dtype) if isinstance(x, Tensor) else x


def scalar(value: Any, dtype: str) -> Tensor:
    """A number as a 0-d constant of `dtype` (an operand where an op wants a tensor)."""
    return constant(np.array(value, dtype=dtype), dtype=dtype)


def _one(value: float, what: str) -> None:
    if value != 1:
        raise Unmapped(f"{what}={value} (only 1 maps)")


# --- identities and views (copies in minigraph) ---------------------------------------------

@rule("detach", "alias", "clone", "lift_fresh_copy", "contiguous", args="self")
def _identity(c, n):
    return c.arg(n, 0)


@rule("_to_copy", args="self dtype")
def _to_copy(c, n):
    return ops.cast(c.arg(n, 0), c.spec(n)[1])


@rule("view", "_unsafe_view", "reshape", "unsqueeze", "squeeze", "flatten",
      args="self size shape dim start_dim end_dim")
def _reshape(c, n):
    return ops.reshape(c.arg(n, 0), c.spec(n)[0])


def _permuted(x: Tensor, perm: tuple[int, ...]) -> Tensor:
    """transpose(x, perm), folding a transpose of a transpose into one (or none)."""
    if x.call is not None and x.call.op == "transpose":
        inner = tuple(x.call.attrs["axes"])
        x, perm = x.call.inputs[0], tuple(inner[p] for p in perm)
    if perm == tuple(range(x.ndim)):
        return x
    return ops.transpose(x, perm)


@rule("t", args="self")
def _t(c, n):
    x = c.arg(n, 0)
    return _permuted(x, (1, 0)) if x.ndim == 2 else x


@rule("transpose", args="self dim0 dim1")
def _transpose(c, n):
    x = c.arg(n, 0)
    perm = list(range(x.ndim))
    a, b = c.arg(n, 1) % x.ndim, c.arg(n, 2) % x.ndim
    perm[a], perm[b] = perm[b], perm[a]
    return _permuted(x, tuple(perm))


@rule("permute", args="self dims")
def _permute(c, n):
    x = c.arg(n, 0)
    return _permuted(x, tuple(d % x.ndim for d in c.arg(n, 1)))


@rule("expand", args="self size implicit")
def _expand(c, n):
    return ops.broadcast_to(c.arg(n, 0), c.spec(n)[0])


def _slice_of(x: Tensor, dim: int, start, end, step) -> Tensor:
    size = x.shape[dim]
    start = 0 if start is None else start
    end = size if end is None else min(end, size)
    return ops.slice(x, dim, start, end, step)


@rule("slice", args="self dim start end step")
def _slice(c, n):
    x = c.arg(n, 0)
    dim, start, end, step = (c.arg(n, k, d) for k, d in ((1, 0), (2, None), (3, None), (4, 1)))
    return _slice_of(x, dim % x.ndim, start, end, step)


@rule("select", args="self dim index")
def _select(c, n):
    x = c.arg(n, 0)
    dim = c.arg(n, 1) % x.ndim
    return ops.getitem(x, (slice(None),) * dim + (c.arg(n, 2),))


@rule("split", "split_with_sizes", args="self split_size split_sizes dim")
def _split(c, n):
    x, sizes = c.arg(n, 0), c.arg(n, 1)
    dim = c.arg(n, 2, 0) % x.ndim
    if isinstance(sizes, int):
        sizes = [sizes] * (-(-x.shape[dim] // sizes))
    out, at = [], 0
    for s in sizes:
        out.append(_slice_of(x, dim, at, at + s, 1))
        at += s
    return tuple(out)


@rule("unbind", args="self dim")
def _unbind(c, n):
    x = c.arg(n, 0)
    dim = c.arg(n, 1, 0) % x.ndim
    return tuple(ops.getitem(x, (slice(None),) * dim + (k,)) for k in range(x.shape[dim]))


@rule("cat", args="tensors dim")
def _cat(c, n):
    xs = c.arg(n, 0)
    return ops.concat(list(xs), c.arg(n, 1, 0))


@rule("stack", args="tensors dim")
def _stack(c, n):
    xs = list(c.arg(n, 0))
    axis = c.arg(n, 1, 0) % (xs[0].ndim + 1)
    # stack = concat of the inputs, each with a new axis of length 1 (a reshape: a copy)
    return ops.concat([ops.reshape(x, (*x.shape[:axis], 1, *x.shape[axis:])) for x in xs],
                      axis)


# --- constants -------------------------------------------------------------------------------

def _const(c, n, value: float):
    shape, dtype = c.spec(n)
    return constant(np.full(shape, value, dtype=dtype), dtype=dtype)


@rule("ones_like", "ones", "new_ones", args="self size dtype")
def _ones(c, n):
    return _const(c, n, 1.0)


@rule("zeros_like", "zeros", "new_zeros", "empty_like", "empty", "new_empty",
      args="self size dtype")
def _zeros(c, n):
    return _const(c, n, 0.0)


@rule("full", "full_like", "scalar_tensor", "new_full", args="self size fill_value s dtype")
def _full(c, n):
    k = {"full": 1, "full_like": 1, "scalar_tensor": 0, "new_full": 2}[c.short(n)]
    return _const(c, n, float(c.arg(n, k)))


# --- elementwise -----------------------------------------------------------------------------

def _arith(fn):
    """The rule of add, sub, mul, div (no rounding): each tensor operand cast to the dtype
    PyTorch's promotion gave the output; `alpha` scales the second operand."""
    def go(c, n):
        dt = c.spec(n)[1]
        a, b = cast_to(c.arg(n, 0), dt), cast_to(c.arg(n, 1), dt)
        alpha = c.kwarg(n, "alpha", 1)
        if alpha != 1:
            b = ops.mul_scalar(b, alpha) if isinstance(b, Tensor) else b * alpha
        if not isinstance(a, Tensor):
            a = scalar(a, dt)
        return fn(a, b)
    return go


rule("add", args="self other alpha")(_arith(ops.add))
rule("sub", args="self other alpha")(_arith(ops.sub))
rule("mul", args="self other")(_arith(ops.mul))


@rule("div", args="self other rounding_mode")
def _div(c, n):
    mode = c.kwarg(n, "rounding_mode", c.arg(n, 2, None))
    if mode is None:
        return _arith(ops.div)(c, n)
    dt = c.spec(n)[1]
    a, b = (v if isinstance(v, Tensor) else scalar(v, dt)
            for v in (cast_to(c.arg(n, 0), dt), cast_to(c.arg(n, 1), dt)))
    return ops.div_round(a, b, mode)


@rule("floor_divide", args="self other")
def _floor_divide(c, n):
    dt = c.spec(n)[1]
    a, b = (v if isinstance(v, Tensor) else scalar(v, dt)
            for v in (cast_to(c.arg(n, 0), dt), cast_to(c.arg(n, 1), dt)))
    return ops.div_round(a, b, "floor")


@rule("rsub", args="self other alpha")
def _rsub(c, n):
    dt = c.spec(n)[1]
    a, b = cast_to(c.arg(n, 0), dt), c.arg(n, 1)
    _one(c.kwarg(n, "alpha", 1), "alpha")
    return ops.sub(cast_to(b, dt) if isinstance(b, Tensor) else scalar(b, dt), a)


_UNARY = {"neg": ops.neg, "exp": ops.exp, "log": ops.log, "sqrt": ops.sqrt, "relu": ops.relu,
          "tanh": ops.tanh, "sigmoid": ops.sigmoid}
for _name, _fn in _UNARY.items():
    rule(_name, args="self")(lambda c, n, _fn=_fn: _fn(c.arg(n, 0)))


@rule("rsqrt", args="self")
def _rsqrt(c, n):
    return ops.pow(c.arg(n, 0), -0.5)


@rule("reciprocal", args="self")
def _reciprocal(c, n):
    return ops.div(1.0, c.arg(n, 0))


@rule("pow", args="self exponent")
def _pow(c, n):
    p = c.arg(n, 1)
    if isinstance(p, Tensor) or not isinstance(c.arg(n, 0), Tensor):
        raise Unmapped("a tensor exponent, or a number raised to a tensor")
    return ops.pow(c.arg(n, 0), float(p))


@rule("threshold_backward", args="grad_output self threshold")
def _threshold_backward(c, n):
    if c.arg(n, 2) != 0:
        raise Unmapped(f"threshold {c.arg(n, 2)} (relu's 0 maps)")
    return apply1("relu_grad", [c.arg(n, 0), c.arg(n, 1)])


@rule("tanh_backward", args="grad_output output")
def _tanh_backward(c, n):
    return apply1("tanh_grad", [c.arg(n, 0), c.arg(n, 1)])


@rule("sigmoid_backward", args="grad_output output")
def _sigmoid_backward(c, n):
    return apply1("sigmoid_grad", [c.arg(n, 0), c.arg(n, 1)])


def _gelu_form(c, n, k: int) -> str:
    """"erf" (PyTorch's default, `approximate='none'`) or "tanh"."""
    approx = c.kwarg(n, "approximate", c.arg(n, k, "none"))
    if approx not in ("none", "tanh"):
        raise Unmapped(f"GELU with approximate={approx!r}")
    return "erf" if approx == "none" else "tanh"


@rule("gelu", args="self approximate")
def _gelu(c, n):
    fn = ops.gelu_erf if _gelu_form(c, n, 1) == "erf" else ops.gelu
    return fn(c.arg(n, 0))


@rule("gelu_backward", args="grad_output self approximate")
def _gelu_backward(c, n):
    op = "gelu_erf_grad" if _gelu_form(c, n, 2) == "erf" else "gelu_grad"
    return apply1(op, [c.arg(n, 0), c.arg(n, 1)])


# --- reductions ------------------------------------------------------------------------------

def _dims(c, n, x: Tensor):
    dims = c.arg(n, 1, None)
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return None
    dims = [dims] if isinstance(dims, int) else dims
    return tuple(d % x.ndim for d in dims)


@rule("sum", args="self dim keepdim dtype")
def _sum(c, n):
    x = ops.cast(c.arg(n, 0), c.spec(n)[1])     # bools sum as int64, as PyTorch
    return ops.sum(x, axis=_dims(c, n, x), keepdims=bool(c.arg(n, 2, False)))


@rule("mean", args="self dim keepdim dtype")
def _mean(c, n):
    x = ops.cast(c.arg(n, 0), c.spec(n)[1])
    return ops.mean(x, axis=_dims(c, n, x), keepdims=bool(c.arg(n, 2, False)))


# --- matrix products (a transpose feeding a product becomes the product's flag) -------------

def _untransposed(x: Tensor) -> tuple[Tensor, bool]:
    call = x.call
    if call is not None and call.op == "transpose" and x.ndim >= 2 and \
            tuple(call.attrs["axes"]) == tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2):
        return call.inputs[0], True
    return x, False


def _matmul(a: Tensor, b: Tensor) -> Tensor:
    (a, ta), (b, tb) = _untransposed(a), _untransposed(b)
    return ops.matmul(a, b, ta=ta, tb=tb)


@rule("mm", "bmm", args="self mat2")
def _mm(c, n):
    return _matmul(c.arg(n, 0), c.arg(n, 1))


@rule("addmm", args="self mat1 mat2 beta alpha")
def _addmm(c, n):
    _one(c.kwarg(n, "beta", 1), "beta")
    _one(c.kwarg(n, "alpha", 1), "alpha")
    return ops.add(_matmul(c.arg(n, 1), c.arg(n, 2)), c.arg(n, 0))


# --- softmax, losses -------------------------------------------------------------------------

@rule("_softmax", "_log_softmax", args="self dim half_to_float")
def _softmax(c, n):
    x = c.arg(n, 0)
    if c.arg(n, 2, False):
        raise Unmapped("half_to_float=True (a float16 input, a float32 result)")
    fn = ops.softmax if c.short(n) == "_softmax" else ops.log_softmax
    return fn(x, axis=c.arg(n, 1))


@rule("_softmax_backward_data", "_log_softmax_backward_data",
      args="grad_output output dim input_dtype")
def _softmax_backward(c, n):
    op = "softmax_grad" if c.short(n) == "_softmax_backward_data" else "log_softmax_grad"
    y = c.arg(n, 1)
    return apply1(op, [c.arg(n, 0), y], {"axis": c.arg(n, 2) % y.ndim})


def _nll_checks(c, n, x: Tensor, labels: Tensor, weight, reduction: int,
                ignore_index: int) -> None:
    if weight is not None:
        raise Unmapped("class weights")
    if reduction not in (1, 2):
        raise Unmapped("reduction='none'")
    # An ignore_index that no valid label can equal changes nothing (a label out of range
    # is refused when the graph runs); one inside [0, C) would drop rows minigraph keeps.
    if x.ndim in (2, 4) and 0 <= ignore_index < x.shape[1]:
        raise Unmapped(f"ignore_index={ignore_index} (a class of the {list(x.shape)} "
                       "input): minigraph's cross-entropy ignores no rows")
    example = c.example(labels)
    hit = 0 if example is None else int(np.count_nonzero(example == ignore_index))
    if hit:
        raise Unmapped(f"{hit} of the {example.size} labels of the example batch equal "
                       f"ignore_index={ignore_index}: PyTorch leaves them out of the loss, "
                       "minigraph's cross-entropy ignores no label (it refuses one outside "
                       "[0, classes) when it runs)")
    if x.ndim not in (2, 4) or x.call is None or x.call.op != "log_softmax" or \
            x.call.attrs["axis"] != 1:
        raise Unmapped("nll_loss maps only on the [N, C] (or [N, C, H, W]) output of "
                       "log_softmax over the classes")


def _classes_last(x: Tensor) -> Tensor:
    """[N, C, H, W] log-probabilities as [N, H, W, C] (softmax_cross_entropy's layout)."""
    return x if x.ndim == 2 else ops.transpose(x, (0, 2, 3, 1))


def _through_detach(c, fx_node):
    """The FX node a chain of detach/alias nodes starts from (they are identities)."""
    while c.short(fx_node) in ("detach", "alias"):
        fx_node = fx_node.args[0]
    return fx_node


@rule("nll_loss_forward", "nll_loss2d_forward", args="self target weight reduction ignore_index")
def _nll_loss(c, n):
    x, labels, weight, reduction, ignore_index = (c.arg(n, k) for k in range(5))
    _nll_checks(c, n, x, labels, weight, reduction, ignore_index)
    # On log-probabilities, log-softmax is the identity: the cross-entropy of x is nll(x).
    loss = ops.softmax_cross_entropy(_classes_last(x), labels)
    count = float(np.prod(labels.shape))
    if reduction == 2:
        loss = ops.mul_scalar(loss, count)
    return loss, scalar(count, x.dtype)


@rule("nll_loss_backward", "nll_loss2d_backward",
      args="grad_output self target weight reduction ignore_index total_weight")
def _nll_loss_backward(c, n):
    g, x, labels, weight, reduction, ignore_index = (c.arg(n, k) for k in range(6))
    _nll_checks(c, n, x, labels, weight, reduction, ignore_index)
    fx_x = _through_detach(c, n.args[1])
    for user in n.users:
        if c.short(user) != "_log_softmax_backward_data" or \
                _through_detach(c, user.args[1]) is not fx_x:
            raise Unmapped("nll_loss_backward maps only when log_softmax's backward reads it")
    # (softmax(x) - onehot) g / N differs from nll's -onehot g / N by softmax(x) g / N, which
    # the log-softmax backward that follows removes: the gradient of x's input is exact.
    if reduction == 2:
        g = ops.mul_scalar(g, float(np.prod(labels.shape)))
    d = apply1("softmax_cross_entropy_grad", [g, _classes_last(x), labels])
    return d if x.ndim == 2 else ops.transpose(d, (0, 3, 1, 2))


@rule("mse_loss", args="self target reduction")
def _mse_loss(c, n):
    if c.arg(n, 2, 1) != 1:
        raise Unmapped("mse_loss with reduction other than 'mean'")
    return ops.mse(c.arg(n, 0), c.arg(n, 1))


@rule("mse_loss_backward", args="grad_output self target reduction")
def _mse_loss_backward(c, n):
    if c.arg(n, 3, 1) != 1:
        raise Unmapped("mse_loss with reduction other than 'mean'")
    return apply1("mse_grad", [c.arg(n, 0), c.arg(n, 1), c.arg(n, 2)])


# --- convolution and pooling -----------------------------------------------------------------

def _conv_form(x: Tensor, w: Tensor, stride, padding, dilation, groups) -> tuple[str, dict]:
    """The minigraph op family ("conv2d", or "conv2d_grouped" for groups or dilation) and
    its attributes; a 1-d convolution is a 2-d one on a height-1 image."""
    d = x.ndim - 2
    if d not in (1, 2) or w.ndim != x.ndim or \
            not len(stride) == len(padding) == len(dilation) == d:
        raise Unmapped(f"a {d}-d convolution (1-d and 2-d ones map)")

    def two(v, fill):
        return (fill, int(v[0])) if d == 1 else (int(v[0]), int(v[1]))
    attrs = {"stride": two(stride, 1), "padding": two(padding, 0)}
    if groups == 1 and all(v == 1 for v in dilation):
        return "conv2d", attrs
    return "conv2d_grouped", {**attrs, "dilation": two(dilation, 1), "groups": int(groups)}


def _as_2d(t: Tensor) -> Tensor:
    """[N, C, L] as [N, C, 1, L] (a 1-d convolution's operands); 4-d tensors as they are."""
    return t if t.ndim == 4 else ops.reshape(t, (*t.shape[:2], 1, t.shape[2]))


@rule("convolution", args="input weight bias stride padding dilation transposed "
      "output_padding groups")
def _convolution(c, n):
    x, w, b, stride, padding, dilation, transposed, out_pad, groups = \
        (c.arg(n, k) for k in range(9))
    op, attrs = _conv_form(x, w, stride, padding, dilation, groups)
    shape = c.spec(n)[0]
    x2, w2 = _as_2d(x), _as_2d(w)
    if transposed:
        # A transposed convolution is the gradient of a convolution with respect to its
        # input: the convolution of the output's shape that gives back x's [Dumoulin 2016].
        out2 = shape if len(shape) == 4 else (*shape[:2], 1, shape[2])
        for o, i, k, st, p, dl in zip(out2[2:], x2.shape[2:], w2.shape[2:], attrs["stride"],
                                      attrs["padding"], attrs.get("dilation", (1, 1))):
            if (o + 2 * p - dl * (k - 1) - 1) // st + 1 != i:
                raise Unmapped(f"a transposed convolution to {list(shape)} that does not "
                               f"convolve back to its input {list(x.shape)}")
        y = apply1(op + "_grad_x", [x2, w2], {**attrs, "x_shape": tuple(out2)})
    elif any(out_pad):
        raise Unmapped(f"output_padding={list(out_pad)} on a convolution that is not transposed")
    else:
        y = apply1(op, [x2, w2], attrs)
    y = ops.reshape(y, shape)
    return y if b is None else ops.add(y, ops.reshape(b, (b.shape[0],) + (1,) * (len(shape) - 2)))


@rule("convolution_backward", args="grad_output input weight bias_sizes stride padding "
      "dilation transposed output_padding groups output_mask")
def _convolution_backward(c, n):
    g, x, w, _, stride, padding, dilation, transposed, out_pad, groups, mask = \
        (c.arg(n, k) for k in range(11))
    op, attrs = _conv_form(x, w, stride, padding, dilation, groups)
    g2, x2, w2 = _as_2d(g), _as_2d(x), _as_2d(w)
    dx = dw = db = None
    if transposed:        # y = conv_grad_x(x, w): its adjoints are a convolution of g ...
        if mask[0]:
            dx = apply1(op, [g2, w2], attrs)
        if mask[1]:       # ... and the weight gradient with the roles of x and g swapped
            dw = apply1(op + "_grad_w", [x2, g2], {**attrs, "w_shape": tuple(w2.shape)})
    else:
        if mask[0]:
            dx = apply1(op + "_grad_x", [g2, w2], {**attrs, "x_shape": tuple(x2.shape)})
        if mask[1]:
            dw = apply1(op + "_grad_w", [g2, x2], {**attrs, "w_shape": tuple(w2.shape)})
    if mask[2]:
        db = ops.sum(g, axis=(0, *range(2, g.ndim)))
    return (None if dx is None else ops.reshape(dx, x.shape),
            None if dw is None else ops.reshape(dw, w.shape), db)


def _pool_args(c, n, k0: int) -> tuple:
    kernel = tuple(c.arg(n, k0))
    stride = tuple(c.arg(n, k0 + 1, ())) or kernel
    padding = c.arg(n, k0 + 2, 0)
    padding = tuple(padding) if isinstance(padding, (list, tuple)) else (padding, padding)
    return kernel, stride, padding


@rule("max_pool2d_with_indices", args="self kernel_size stride padding dilation ceil_mode")
def _max_pool(c, n):
    x = c.arg(n, 0)
    kernel, stride, padding = _pool_args(c, n, 1)
    dilation, ceil = c.arg(n, 4, 1), c.arg(n, 5, False)
    if ceil or any(d != 1 for d in ([dilation] if isinstance(dilation, int) else dilation)):
        raise Unmapped("max-pooling with ceil_mode or dilation")
    y = ops.max_pool2d(x, kernel, stride if len(stride) == 2 else stride * 2,
                       padding if len(padding) == 2 else padding * 2)
    return y, PoolIndices(y, x)


@rule("max_pool2d_with_indices_backward",
      args="grad_output self kernel_size stride padding dilation ceil_mode indices")
def _max_pool_backward(c, n):
    g, x, idx = c.arg(n, 0), c.arg(n, 1), c.arg(n, 7)
    if not isinstance(idx, PoolIndices) or idx.x is not x:
        raise Unmapped("max-pool indices that do not come from max_pool2d of the same input")
    return apply1("max_pool2d_grad", [g, x, idx.y], idx.y.call.attrs)


@rule("avg_pool2d",
      args="self kernel_size stride padding ceil_mode count_include_pad divisor_override")
def _avg_pool(c, n):
    x = c.arg(n, 0)
    kernel, stride, padding = _pool_args(c, n, 1)
    if c.arg(n, 4, False) or c.arg(n, 6, None) is not None or \
            (any(padding) and not c.arg(n, 5, True)):
        raise Unmapped("avg-pooling with ceil_mode, divisor_override or count_include_pad=False")
    return ops.avg_pool2d(x, kernel, stride, padding)


@rule("avg_pool2d_backward", args="grad_output self kernel_size stride padding ceil_mode "
      "count_include_pad divisor_override")
def _avg_pool_backward(c, n):
    g, x = c.arg(n, 0), c.arg(n, 1)
    kernel, stride, padding = _pool_args(c, n, 2)
    if c.arg(n, 5, False) or c.arg(n, 7, None) is not None or \
            (any(padding) and not c.arg(n, 6, True)):
        raise Unmapped("avg-pooling with ceil_mode, divisor_override or count_include_pad=False")
    attrs = ops.avg_pool2d(x, kernel, stride, padding).call.attrs   # the same attributes
    return apply1("avg_pool2d_grad", [g], {**attrs, "x_shape": x.shape})


def _adaptive(x: Tensor, out_hw) -> tuple[int, int]:
    h, w = x.shape[2:]
    oh, ow = out_hw
    if x.ndim != 4 or h % oh or w % ow:
        raise Unmapped(f"adaptive pooling of {h}x{w} to {oh}x{ow} (only whole windows map)")
    return h // oh, w // ow


@rule("_adaptive_avg_pool2d", args="self output_size")
def _adaptive_avg_pool(c, n):
    x = c.arg(n, 0)
    kh, kw = _adaptive(x, c.arg(n, 1))
    if (kh, kw) == tuple(x.shape[2:]):
        return ops.mean(x, axis=(2, 3), keepdims=True)
    return ops.avg_pool2d(x, (kh, kw))


@rule("_adaptive_avg_pool2d_backward", args="grad_output self")
def _adaptive_avg_pool_backward(c, n):
    g, x = c.arg(n, 0), c.arg(n, 1)
    kh, kw = _adaptive(x, g.shape[2:])
    if (kh, kw) == tuple(x.shape[2:]):
        return ops.broadcast_to(ops.mul_scalar(g, 1.0 / (kh * kw)), x.shape)
    attrs = ops.avg_pool2d(x, (kh, kw)).call.attrs
    return apply1("avg_pool2d_grad", [g], {**attrs, "x_shape": x.shape})


# --- normalisation and embedding -------------------------------------------------------------

def _affine(c, x: Tensor, w, b, channels: int) -> tuple[Tensor, Tensor]:
    if w is None:
        w = constant(np.ones((channels,), x.dtype), dtype=x.dtype)
    if b is None:
        b = constant(np.zeros((channels,), x.dtype), dtype=x.dtype)
    return w, b


def _nchw(x: Tensor) -> Tensor:
    """[N, C, ...] as minigraph's batch_norm takes it: [N, C] and [N, C, H, W] as they are,
    [N, C, L] (BatchNorm1d) and [N, C, D, H, W] (BatchNorm3d) as [N, C, L, 1]; the statistics
    are per channel either way."""
    return x if x.ndim in (2, 4) else ops.reshape(x, (*x.shape[:2], -1, 1))


@rule("_native_batch_norm_legit_functional", "native_batch_norm",
      args="input weight bias running_mean running_var training momentum eps")
def _batch_norm(c, n):
    x, w, b, rm, rv, training, _, eps = (c.arg(n, k) for k in range(8))
    if not training:
        raise Unmapped("batch norm in eval mode (running statistics)")
    w, b = _affine(c, x, w, b, x.shape[1])
    y, mean, rstd = apply("batch_norm", [_nchw(x), w, b], {"eps": float(eps)})
    y = ops.reshape(y, x.shape)
    new = tuple(Dropped(f"the new running statistic {k} of batch norm at {n.name}")
                for k in range(len(c.specs(n)) - 3))
    return (y, mean, rstd) + new


def _running(x: Tensor, rm: Tensor, rv: Tensor, eps: float) -> tuple[Tensor, Tensor, tuple]:
    """Eval mode: per-channel 1/sqrt(running var + eps), shaped to broadcast over x, with
    the running mean likewise, and the axes a per-channel sum reduces."""
    if x.ndim < 2 or rm is None or rv is None:
        raise Unmapped("eval-mode batch norm needs [N, C, ...] and running statistics")
    bshape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    rstd = ops.reshape(ops.pow(ops.add(rv, float(eps)), -0.5), bshape)
    return rstd, ops.reshape(rm, bshape), (0,) + tuple(range(2, x.ndim))


@rule("_native_batch_norm_legit_no_training",
      args="input weight bias running_mean running_var momentum eps")
def _batch_norm_eval(c, n):
    x, w, b, rm, rv, _, eps = (c.arg(n, k) for k in range(7))
    w, b = _affine(c, x, w, b, x.shape[1])
    rstd, mean, _ = _running(x, rm, rv, eps)
    bshape = mean.shape
    y = ops.mul(ops.sub(x, mean), ops.mul(rstd, ops.reshape(w, bshape)))
    y = ops.add(y, ops.reshape(b, bshape))
    return (y,) + tuple(None if s is None else constant(np.zeros(s[0], s[1]), dtype=s[1])
                        for s in c.specs(n)[1:])     # PyTorch's empty saved statistics


@rule("native_batch_norm_backward", args="grad_out input weight running_mean running_var "
      "save_mean save_invstd train eps output_mask")
def _batch_norm_backward(c, n):
    # args 3 and 4 are the running statistics (read in eval mode only; dropped in training)
    g, x, w, train, eps, mask = (c.arg(n, k) for k in (0, 1, 2, 7, 8, 9))
    w, _ = _affine(c, x, w, None, x.shape[1])
    if train:
        dx, dw, db = apply("batch_norm_grad", [_nchw(g), _nchw(x), w, c.arg(n, 5), c.arg(n, 6)])
        return ops.reshape(dx, x.shape), dw, db
    rstd, mean, axes = _running(x, c.arg(n, 3), c.arg(n, 4), eps)
    # y = (x - mean) * rstd * w + b with constant mean and rstd: elementwise gradients
    dx = ops.mul(g, ops.mul(rstd, ops.reshape(w, mean.shape))) if mask[0] else None
    dw = ops.sum(ops.mul(g, ops.mul(ops.sub(x, mean), rstd)), axis=axes) if mask[1] else None
    db = ops.sum(g, axis=axes) if mask[2] else None
    return dx, dw, db


def _saved_stat(t: Tensor) -> Tensor:
    """layer_norm's saved mean/rstd without the [..., 1] reshape PyTorch's shape needs."""
    if t.call is not None and t.call.op == "reshape":
        return t.call.inputs[0]
    return t


@rule("native_layer_norm", args="input normalized_shape weight bias eps")
def _layer_norm(c, n):
    x, shape, w, b, eps = (c.arg(n, k) for k in range(5))
    if len(shape) != 1:
        raise Unmapped(f"layer norm over {len(shape)} axes (the last axis maps)")
    w, b = _affine(c, x, w, b, x.shape[-1])
    y, mean, rstd = apply("layer_norm", [x, w, b], {"eps": float(eps)})
    stat_shape = c.specs(n)[1][0]
    return y, ops.reshape(mean, stat_shape), ops.reshape(rstd, stat_shape)


@rule("native_layer_norm_backward",
      args="grad_out input normalized_shape mean rstd weight bias output_mask")
def _layer_norm_backward(c, n):
    g, x, shape, mean, rstd, w = (c.arg(n, k) for k in range(6))
    if len(shape) != 1:
        raise Unmapped(f"layer norm over {len(shape)} axes (the last axis maps)")
    w, _ = _affine(c, x, w, None, x.shape[-1])
    return apply("layer_norm_grad", [g, x, w, _saved_stat(mean), _saved_stat(rstd)])


@rule("embedding", args="weight indices padding_idx scale_grad_by_freq sparse")
def _embedding(c, n):
    # padding_idx and scale_grad_by_freq change only the gradient (embedding_dense_backward)
    table, ids = c.arg(n, 0), c.arg(n, 1)
    if c.arg(n, 4, False):
        raise Unmapped("sparse=True (a sparse gradient)")
    return ops.embedding(ids, table)


@rule("embedding_dense_backward",
      args="grad_output indices num_weights padding_idx scale_grad_by_freq")
def _embedding_backward(c, n):
    g, ids, vocab, pad, scale = (c.arg(n, k) for k in range(5))
    if scale:
        raise Unmapped("scale_grad_by_freq=True")
    d = apply1("embedding_grad", [g, ids], {"vocab": int(vocab)})
    if pad == -1:
        return d
    # The padding row gets no gradient: the scattered rows times a column of ones with a
    # 0 at padding_idx (PyTorch skips that row).
    keep = np.ones((int(vocab), 1), dtype=d.dtype)
    keep[int(pad) % int(vocab)] = 0
    return ops.mul(d, constant(keep, dtype=d.dtype))

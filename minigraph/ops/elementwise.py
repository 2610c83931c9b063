"""Elementwise ops: binary with NumPy broadcasting, scalar ops, activations.

Each op is one `defop` block: shape rule, kernel writing into `outs`, gradient rule (which
builds backward nodes), and in-place capability. Elementwise kernels read element i before
they write element i, so an output may overwrite an input of the same size: they declare
`inplace=((0, k),)`. Gradient rules reference only what they need: `relu_grad` reads the
*output* y, never x, so x can be freed after the forward pass (the point about F in [Chen 2016]).
"""

from __future__ import annotations

import math
from numbers import Number

import numpy as np

from ..backend import on_cupy
from ..errors import DTypeError
from ..graph import Tensor, check_same_dtype, constant
from .broadcast import sum_to
from .cuda import gelu as gelu_kernel
from .cuda import gelu_grad as gelu_grad_kernel
from .registry import apply1, defop, itemsize, no_workspace, numel, shape_error


def _same(attrs, x):
    return [(x.shape, x.dtype)]


def _float_only(op, *ts):
    for t in ts:
        if np.dtype(t.dtype).kind != "f":
            raise DTypeError(f"{op}({', '.join(f'{u.name}[{u.dtype}]' for u in ts)}): "
                             f"{t.name} must be a floating tensor")


def _float(op):
    """The shape rule of a unary op defined on floats only (its kernel writes fractions)."""
    def infer(attrs, x):
        _float_only(op, x)
        return _same(attrs, x)
    return infer


def _scalar_same(op, key="c"):
    """The shape rule of a scalar op: an integer tensor takes only whole constants (the
    kernel casts the constant to the tensor's dtype: `x * 0.5` would be `x * 0`)."""
    def infer(attrs, x):
        c = attrs[key]
        if np.dtype(x.dtype).kind in "iub" and not float(c).is_integer():
            raise DTypeError(f"{op}({x.name}[{x.dtype}], {c}): an integer tensor takes only "
                             f"whole constants; convert {x.name} to a float dtype first")
        return _same(attrs, x)
    return infer


# --- broadcasting binary ops ---------------------------------------------------------------

def _broadcast(op):
    def infer(attrs, a, b):
        dt = check_same_dtype(op, a, b)
        try:
            shape = np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            raise shape_error(op, [a, b], "shapes do not broadcast") from None
        return [(tuple(shape), dt)]
    return infer


def _binary_inplace(op):
    # Output may take either input's bytes; the planner checks that sizes really match.
    return ((0, 0), (0, 1))


defop("add", infer=_broadcast("add"),
      forward=lambda ctx, a, ins, outs: ctx.xp.add(ins[0], ins[1], out=outs[0]),
      grad=lambda a, ins, outs, g: [sum_to(g[0], ins[0].shape), sum_to(g[0], ins[1].shape)],
      inplace=_binary_inplace("add"))

defop("sub", infer=_broadcast("sub"),
      forward=lambda ctx, a, ins, outs: ctx.xp.subtract(ins[0], ins[1], out=outs[0]),
      grad=lambda a, ins, outs, g: [sum_to(g[0], ins[0].shape),
                                    sum_to(neg(g[0]), ins[1].shape)],
      inplace=_binary_inplace("sub"))

defop("mul", infer=_broadcast("mul"),
      forward=lambda ctx, a, ins, outs: ctx.xp.multiply(ins[0], ins[1], out=outs[0]),
      grad=lambda a, ins, outs, g: [sum_to(mul(g[0], ins[1]), ins[0].shape),
                                    sum_to(mul(g[0], ins[0]), ins[1].shape)],
      inplace=_binary_inplace("mul"))


def _div_grad(a, ins, outs, g):
    x, y = ins
    gx = div(g[0], y)
    gy = neg(div(mul(g[0], outs[0]), y))   # d(x/y)/dy = -(x/y)/y
    return [sum_to(gx, x.shape), sum_to(gy, y.shape)]


def _div_infer(attrs, a, b):
    _float_only("div", a, b)     # a quotient of integers is a fraction: no integer kernel
    return _broadcast("div")(attrs, a, b)


defop("div", infer=_div_infer,
      forward=lambda ctx, a, ins, outs: ctx.xp.divide(ins[0], ins[1], out=outs[0]),
      grad=_div_grad, inplace=((0, 0),))


# --- the aggregation node of the gradient pass -------------------------------------------------

def _add_n_infer(attrs, *xs):
    for x in xs[1:]:
        if x.shape != xs[0].shape:
            raise shape_error("add_n", xs, "all operands must have the same shape")
    check_same_dtype("add_n", *xs)
    return [(xs[0].shape, xs[0].dtype)]


def _add_n_forward(ctx, attrs, ins, outs):
    # Fixed left-to-right order: the sum is bitwise reproducible, whatever the memory plan.
    ctx.xp.add(ins[0], ins[1], out=outs[0])
    for x in ins[2:]:
        ctx.xp.add(outs[0], x, out=outs[0])


defop("add_n", infer=_add_n_infer, forward=_add_n_forward,
      grad=lambda a, ins, outs, g: [g[0]] * len(ins),
      inplace=((0, 0), (0, 1)),
      flops=lambda a, ins, outs: (len(ins) - 1) * numel(outs[0]))


def add_n(*xs: Tensor) -> Tensor:
    """Sum of same-shaped tensors: the gradient aggregation node (no split layer needed)."""
    return xs[0] if len(xs) == 1 else apply1("add_n", list(xs))


# --- scalar ops -------------------------------------------------------------------------------

def _scalar(ctx, dtype, c):
    return np.dtype(dtype).type(c)


defop("add_scalar", infer=_scalar_same("add_scalar"),
      forward=lambda ctx, a, ins, outs: ctx.xp.add(ins[0], _scalar(ctx, ins[0].dtype, a["c"]),
                                                   out=outs[0]),
      grad=lambda a, ins, outs, g: [g[0]], inplace=((0, 0),))
defop("mul_scalar", infer=_scalar_same("mul_scalar"),
      forward=lambda ctx, a, ins, outs: ctx.xp.multiply(
          ins[0], _scalar(ctx, ins[0].dtype, a["c"]), out=outs[0]),
      grad=lambda a, ins, outs, g: [mul_scalar(g[0], a["c"])], inplace=((0, 0),))
defop("rsub_scalar", infer=_scalar_same("rsub_scalar"),  # c - x
      forward=lambda ctx, a, ins, outs: ctx.xp.subtract(
          _scalar(ctx, ins[0].dtype, a["c"]), ins[0], out=outs[0]),
      grad=lambda a, ins, outs, g: [neg(g[0])], inplace=((0, 0),))
defop("rdiv_scalar", infer=_float("rdiv_scalar"),  # c / x
      forward=lambda ctx, a, ins, outs: ctx.xp.divide(
          _scalar(ctx, ins[0].dtype, a["c"]), ins[0], out=outs[0]),
      grad=lambda a, ins, outs, g: [neg(div(mul(g[0], outs[0]), ins[0]))], inplace=((0, 0),))


def add_scalar(x: Tensor, c: float) -> Tensor:
    return apply1("add_scalar", [x], {"c": float(c)})


def mul_scalar(x: Tensor, c: float) -> Tensor:
    return apply1("mul_scalar", [x], {"c": float(c)})


def _pow_forward(ctx, a, ins, outs):
    ctx.xp.power(ins[0], _scalar(ctx, ins[0].dtype, a["p"]), out=outs[0])


def _pow_infer(attrs, x):
    p = attrs["p"]
    if np.dtype(x.dtype).kind in "iub" and not (float(p).is_integer() and p >= 0):
        raise DTypeError(f"pow({x.name}[{x.dtype}], {p}): an integer tensor takes only "
                         "whole exponents >= 0; convert it to a float dtype first")
    return _same(attrs, x)


def _pow_grad(a, ins, outs, g):
    p = a["p"]
    if p == 0:      # x**0 is constant: the gradient is 0, even at x = 0 (0 * x**-1 is NaN)
        return [mul_scalar(g[0], 0.0)]
    if p == 1:
        return [g[0]]
    if p == 2:
        return [mul(g[0], mul_scalar(ins[0], 2.0))]
    return [mul(g[0], mul_scalar(pow(ins[0], p - 1), p))]


defop("pow", infer=_pow_infer, forward=_pow_forward, grad=_pow_grad, inplace=((0, 0),))


# --- unary activations ----------------------------------------------------------------------

def _neg_fw(ctx, a, ins, outs):
    ctx.xp.negative(ins[0], out=outs[0])


defop("neg", infer=_same, forward=_neg_fw,
      grad=lambda a, ins, outs, g: [neg(g[0])], inplace=((0, 0),))

defop("exp", infer=lambda a, x: (_float_only("exp", x), _same(a, x))[1],
      forward=lambda ctx, a, ins, outs: ctx.xp.exp(ins[0], out=outs[0]),
      grad=lambda a, ins, outs, g: [mul(g[0], outs[0])], inplace=((0, 0),))
defop("log", infer=lambda a, x: (_float_only("log", x), _same(a, x))[1],
      forward=lambda ctx, a, ins, outs: ctx.xp.log(ins[0], out=outs[0]),
      grad=lambda a, ins, outs, g: [div(g[0], ins[0])], inplace=((0, 0),))
defop("sqrt", infer=lambda a, x: (_float_only("sqrt", x), _same(a, x))[1],
      forward=lambda ctx, a, ins, outs: ctx.xp.sqrt(ins[0], out=outs[0]),
      grad=lambda a, ins, outs, g: [div(mul_scalar(g[0], 0.5), outs[0])], inplace=((0, 0),))

# relu: the gradient reads the output y (y > 0 exactly where x > 0).
defop("relu", infer=_same,
      forward=lambda ctx, a, ins, outs: ctx.xp.maximum(ins[0], 0, out=outs[0]),
      grad=lambda a, ins, outs, g: [apply1("relu_grad", [g[0], outs[0]])], inplace=((0, 0),))


def _relu_grad_fw(ctx, a, ins, outs):
    dy, y = ins
    keep = ctx.scratch(y.shape, np.bool_)          # y > 0, one byte an element
    ctx.xp.greater(y, 0, out=keep)
    ctx.xp.multiply(dy, keep, out=outs[0])


defop("relu_grad", infer=lambda a, dy, y: [(dy.shape, dy.dtype)], forward=_relu_grad_fw,
      inplace=((0, 0),), differentiable=(), workspace=lambda a, ins, outs: numel(ins[1]))


def _sigmoid_fw(ctx, a, ins, outs):
    xp, o = ctx.xp, outs[0]
    xp.negative(ins[0], out=o)
    xp.exp(o, out=o)
    xp.add(o, 1, out=o)
    xp.reciprocal(o, out=o)


def _sigmoid_grad_fw(ctx, a, ins, outs):
    # dy * y * (1 - y); (1 - y) in a scratch array, so the output may overwrite dy.
    dy, y = ins
    one_minus = ctx.scratch(y.shape, y.dtype)
    ctx.xp.subtract(1, y, out=one_minus)
    ctx.xp.multiply(dy, y, out=outs[0])
    ctx.xp.multiply(outs[0], one_minus, out=outs[0])


defop("sigmoid", infer=_float("sigmoid"), forward=_sigmoid_fw,
      flops=lambda a, i, o: 4 * numel(o[0]),
      grad=lambda a, ins, outs, g: [apply1("sigmoid_grad", [g[0], outs[0]])], inplace=((0, 0),))
defop("sigmoid_grad", infer=lambda a, dy, y: [(dy.shape, dy.dtype)], forward=_sigmoid_grad_fw,
      inplace=((0, 0),), differentiable=(), flops=lambda a, i, o: 3 * numel(o[0]),
      workspace=lambda a, ins, outs: numel(ins[1]) * itemsize(ins[1]))


def _tanh_grad_fw(ctx, a, ins, outs):
    # dy * (1 - y^2), the factor in a scratch array.
    dy, y = ins
    d = ctx.scratch(y.shape, y.dtype)
    ctx.xp.multiply(y, y, out=d)
    ctx.xp.subtract(1, d, out=d)
    ctx.xp.multiply(dy, d, out=outs[0])


defop("tanh", infer=_float("tanh"),
      forward=lambda ctx, a, ins, outs: ctx.xp.tanh(ins[0], out=outs[0]),
      grad=lambda a, ins, outs, g: [apply1("tanh_grad", [g[0], outs[0]])], inplace=((0, 0),))
defop("tanh_grad", infer=lambda a, dy, y: [(dy.shape, dy.dtype)], forward=_tanh_grad_fw,
      inplace=((0, 0),), differentiable=(), flops=lambda a, i, o: 3 * numel(o[0]),
      workspace=lambda a, ins, outs: numel(ins[1]) * itemsize(ins[1]))

_GELU_C = math.sqrt(2.0 / math.pi)


def _gelu_fw(ctx, a, ins, outs):
    # tanh approximation, as GPT-2 uses: 0.5 x (1 + tanh(c (x + 0.044715 x^3)))
    xp, x = ctx.xp, ins[0]
    if on_cupy(xp):                   # on a GPU: the same formula in one kernel
        return gelu_kernel(x, outs[0])
    c = x.dtype.type(_GELU_C)
    inner = ctx.scratch(x.shape, x.dtype)
    xp.multiply(x, x, out=inner)
    xp.multiply(inner, x.dtype.type(0.044715), out=inner)
    xp.add(inner, 1, out=inner)
    xp.multiply(inner, x, out=inner)
    xp.multiply(inner, c, out=inner)
    xp.tanh(inner, out=inner)
    xp.add(inner, 1, out=inner)
    xp.multiply(inner, x, out=inner)
    xp.multiply(inner, x.dtype.type(0.5), out=outs[0])


def _gelu_grad_fw(ctx, a, ins, outs):
    # With u = c (x + k x^3) and t = tanh(u):
    #   d gelu / dx = 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3k x^2).
    # Two scratch arrays (t, and d for the second term); the output holds 1 - t^2 a while.
    xp, (dy, x), out = ctx.xp, ins, outs[0]
    if on_cupy(xp):                   # on a GPU: the same formula in one kernel
        return gelu_grad_kernel(dy, x, out)
    f = x.dtype.type
    t = ctx.scratch(x.shape, x.dtype)
    d = ctx.scratch(x.shape, x.dtype)
    xp.multiply(x, x, out=d)                    # x^2
    xp.multiply(d, f(0.044715), out=t)
    xp.add(t, 1, out=t)
    xp.multiply(t, x, out=t)                    # x + k x^3
    xp.multiply(t, f(_GELU_C), out=t)
    xp.tanh(t, out=t)                           # t
    xp.multiply(d, f(3 * 0.044715), out=d)
    xp.add(d, 1, out=d)
    xp.multiply(d, x, out=d)
    xp.multiply(d, f(0.5 * _GELU_C), out=d)     # 0.5 x c (1 + 3k x^2)
    xp.multiply(t, t, out=out)
    xp.subtract(1, out, out=out)                # 1 - t^2
    xp.multiply(d, out, out=d)
    xp.add(t, 1, out=t)
    xp.multiply(t, f(0.5), out=t)               # 0.5 (1 + t)
    xp.add(d, t, out=d)
    xp.multiply(dy, d, out=out)


def _gelu_ws(a, ins, outs):
    return ins[0].nbytes if hasattr(ins[0], "nbytes") else 0


defop("gelu", infer=_float("gelu"), forward=_gelu_fw, flops=lambda a, i, o: 9 * numel(o[0]),
      grad=lambda a, ins, outs, g: [apply1("gelu_grad", [g[0], ins[0]])],
      workspace=_gelu_ws, workspace_gpu=no_workspace)
defop("gelu_grad", infer=lambda a, dy, x: [(dy.shape, dy.dtype)], forward=_gelu_grad_fw,
      differentiable=(), flops=lambda a, i, o: 16 * numel(o[0]),
      workspace=lambda a, ins, outs: 2 * numel(ins[1]) * itemsize(ins[1]),
      workspace_gpu=no_workspace)




# --- user-facing functions (with Python-number operands) -------------------------------------

def _is_num(v) -> bool:
    return isinstance(v, (Number, np.number)) and not isinstance(v, bool)


def add(a, b) -> Tensor:
    """a + b, broadcast (NumPy's rules); a number on either side is folded into the
    op (add_scalar) instead of becoming a constant tensor. Gradient: dy to each side, summed
    back to its shape (sum_to)."""
    if _is_num(b):
        return add_scalar(a, b)
    if _is_num(a):
        return add_scalar(b, a)
    return apply1("add", [_t(a), _t(b)])


def sub(a, b) -> Tensor:
    """a - b, broadcast; a number on either side is folded into the op. Gradient: dy and
    -dy, each summed back to its side's shape."""
    if _is_num(b):
        return add_scalar(a, -b)
    if _is_num(a):
        return apply1("rsub_scalar", [b], {"c": float(a)})
    return apply1("sub", [_t(a), _t(b)])


def mul(a, b) -> Tensor:
    """a * b elementwise, broadcast; a number on either side is folded into the op
    (mul_scalar). Gradient: dy * b and dy * a, summed back to each side's shape."""
    if _is_num(b):
        return mul_scalar(a, b)
    if _is_num(a):
        return mul_scalar(b, a)
    return apply1("mul", [_t(a), _t(b)])


def div(a, b) -> Tensor:
    """a / b elementwise, broadcast; dividing by a number multiplies by its reciprocal.
    Gradient: dy / b and -dy * a / b**2, summed back to each side's shape."""
    if _is_num(b):
        return mul_scalar(a, 1.0 / b)
    if _is_num(a):
        return apply1("rdiv_scalar", [b], {"c": float(a)})
    return apply1("div", [_t(a), _t(b)])


def _t(v) -> Tensor:
    return v if isinstance(v, Tensor) else constant(v)


def neg(x: Tensor) -> Tensor:
    """-x. It may write over x (in-place: the output takes the input's bytes)."""
    return apply1("neg", [x])


def pow(x: Tensor, p: float) -> Tensor:  # noqa: A001
    """x ** p for a constant number p (a tensor exponent is refused). Gradient:
    p * x ** (p - 1) * dy."""
    if not _is_num(p):
        raise TypeError(f"pow({x.name}, ...): the exponent must be a constant number")
    return apply1("pow", [x], {"p": float(p)})


def exp(x: Tensor) -> Tensor:
    """e ** x elementwise, on floats. Its gradient reads its own output (dy * y), so y
    stays alive until the backward pass uses it."""
    return apply1("exp", [x])


def log(x: Tensor) -> Tensor:
    """The natural logarithm of x, on floats (x <= 0 gives -inf or nan, as NumPy does).
    Gradient: dy / x."""
    return apply1("log", [x])


def sqrt(x: Tensor) -> Tensor:
    """The square root of x, on floats. Gradient: dy / (2 * y), from its output."""
    return apply1("sqrt", [x])


def relu(x: Tensor) -> Tensor:
    """max(x, 0). It may go in-place; its gradient (dy where y > 0) reads the output, so
    the output, not the input, stays alive for the backward pass."""
    return apply1("relu", [x])


def sigmoid(x: Tensor) -> Tensor:
    """1 / (1 + e ** -x), on floats. Gradient dy * y * (1 - y), from its output: it may
    go in-place."""
    return apply1("sigmoid", [x])


def tanh(x: Tensor) -> Tensor:
    """The hyperbolic tangent of x, on floats. Gradient dy * (1 - y**2), from its output:
    it may go in-place."""
    return apply1("tanh", [x])


def gelu(x: Tensor) -> Tensor:
    """GELU, x * Phi(x), in the tanh approximation GPT-2 uses:
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x**3))) [Hendrycks 2016]. On NumPy its forward
    takes one scratch array (workspace; on CuPy one fused kernel); its gradient reads x."""
    return apply1("gelu", [x])

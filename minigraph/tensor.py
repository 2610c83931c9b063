"""Symbolic tensors while you build a graph.

Building works on `Tensor` handles: `mg.input`, `mg.param`, `mg.constant` make leaves, and
every op call makes a new node whose outputs are new handles (shapes and dtypes are
inferred right there, so a mismatch fails at the line that caused it). `Graph(outputs)`
(graph.py) then freezes everything reachable into plain data.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from .errors import DTypeError, GraphError, ShapeError

_seq = itertools.count()          # creation order; program order is a topological order
_names: dict[str, int] = {}       # per-prefix counters for automatic names
_role = "forward"                 # the role given to nodes created now


def _auto_name(prefix: str) -> str:
    k = _names.get(prefix, 0)
    _names[prefix] = k + 1
    return f"{prefix}_{k}"


@contextlib.contextmanager
def name_scope() -> Iterator[None]:
    """Fresh automatic names inside the block, so a model builds with the same names twice."""
    global _names
    saved, _names = _names, {}
    try:
        yield
    finally:
        _names = saved


@contextlib.contextmanager
def node_role(role: str) -> Iterator[None]:
    """Nodes created inside the block get `role` ("forward", "backward" or "update")."""
    global _role
    saved, _role = _role, role
    try:
        yield
    finally:
        _role = saved


_DTYPE_KINDS = "biufc"   # bool, integers, floats, complex: what kernels compute with


def as_dtype(dtype: Any, name: str = "tensor") -> str:
    """The dtype's name ("float32"); DTypeError naming `name` and the dtype if it is none
    NumPy knows, or not numeric (strings, objects)."""
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError):
        raise DTypeError(f"{name}: unknown dtype {dtype!r} (use e.g. 'float32', 'float64', "
                         "'int64')") from None
    if dt.kind not in _DTYPE_KINDS:
        raise DTypeError(f"{name}: dtype {dt.name} is not numeric")
    return dt.name


# A tensor's bytes must fit in a signed 64-bit integer: sizes, offsets and NumPy's own
# arithmetic are int64, and a wrapped product would report a huge tensor as 0 bytes.
MAX_TENSOR_BYTES = 2**63 - 1


def as_shape(shape: Any, dtype: str, name: str = "tensor") -> tuple[int, ...]:
    """`shape` as a tuple of ints; ShapeError naming `name` for a dimension that is
    negative or not a whole number, or a size whose bytes do not fit in int64."""
    try:
        dims = tuple(shape)
    except TypeError:
        raise ShapeError(f"{name}: shape must be a sequence of ints, not {shape!r}") from None
    out = []
    for d in dims:
        try:
            k = int(d)
            whole = k == d
        except (TypeError, ValueError, OverflowError):
            whole = False
        if not whole or isinstance(d, (bool, np.bool_)):
            raise ShapeError(f"{name}: dimension {d!r} of shape {list(dims)} is not an int")
        if k < 0:
            raise ShapeError(f"{name}: dimension {k} of shape {list(dims)} is negative")
        out.append(k)
    nbytes = math.prod(out) * np.dtype(dtype).itemsize
    if nbytes > MAX_TENSOR_BYTES:
        raise ShapeError(f"{name}{out}: {math.prod(out)} elements of {dtype} do not fit in "
                         f"int64 bytes (at most {MAX_TENSOR_BYTES})")
    return tuple(out)


class Call:
    """One op application while building: op name, attributes, input handles, outputs."""

    __slots__ = ("op", "attrs", "inputs", "name", "role", "seq", "outputs", "deps")

    def __init__(self, op: str, attrs: dict, inputs: tuple[Tensor, ...], name: str, role: str):
        self.op, self.attrs, self.inputs, self.name, self.role = op, attrs, inputs, name, role
        self.seq = next(_seq)
        self.outputs: tuple[Tensor, ...] = ()
        self.deps: tuple[Call, ...] = ()  # control dependencies (run after these)


class Tensor:
    """A symbolic value: name, shape, dtype, and where it comes from. Never holds data."""

    __slots__ = ("name", "shape", "dtype", "kind", "call", "index", "value", "init", "seq")
    __array_priority__ = 1000  # so that `ndarray * tensor` defers to Tensor.__rmul__

    def __init__(self, name: str, shape: Sequence[int], dtype: Any, kind: str,
                 call: Call | None = None, index: int = 0, value: Any = None,
                 init: Any = None):
        self.name, self.dtype = name, as_dtype(dtype, name)
        self.shape = as_shape(shape, self.dtype, name)
        self.kind, self.call, self.index, self.value, self.init = kind, call, index, value, init
        self.seq = next(_seq)

    # Read-only conveniences ------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize

    def __repr__(self) -> str:
        return f"Tensor({self.name}{list(self.shape)}, {self.dtype}, {self.kind})"

    def spec(self) -> str:
        return f"{self.name}[{','.join(map(str, self.shape))}]"

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:  # identity: `==` must not build an op
        return self is other

    def __bool__(self) -> bool:
        raise TypeError(f"tensor {self.name} is symbolic: it has no truth value")

    # Operator overloading: every operator is an ordinary op call (see ops/) -------------
    def __add__(self, o): return FROM_OPS["add"](self, o)
    def __radd__(self, o): return FROM_OPS["add"](o, self)
    def __sub__(self, o): return FROM_OPS["sub"](self, o)
    def __rsub__(self, o): return FROM_OPS["sub"](o, self)
    def __mul__(self, o): return FROM_OPS["mul"](self, o)
    def __rmul__(self, o): return FROM_OPS["mul"](o, self)
    def __truediv__(self, o): return FROM_OPS["div"](self, o)
    def __rtruediv__(self, o): return FROM_OPS["div"](o, self)
    def __neg__(self): return FROM_OPS["neg"](self)
    def __pow__(self, p): return FROM_OPS["pow"](self, p)
    def __matmul__(self, o): return FROM_OPS["matmul"](self, o)
    def __rmatmul__(self, o): return FROM_OPS["matmul"](o, self)
    def __getitem__(self, idx): return FROM_OPS["getitem"](self, idx)

    @property
    def T(self) -> Tensor:
        return FROM_OPS["transpose"](self)

    def reshape(self, *shape) -> Tensor:
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return FROM_OPS["reshape"](self, shape)

    def sum(self, axis=None, keepdims=False) -> Tensor:
        return FROM_OPS["sum"](self, axis=axis, keepdims=keepdims)

    def mean(self, axis=None, keepdims=False) -> Tensor:
        return FROM_OPS["mean"](self, axis=axis, keepdims=keepdims)


# What graph.py uses from the ops package, which imports graph.py (so cannot be imported
# back): the functions behind Tensor's operators (`+`, `@`, `.sum()`...) and an op's FLOP
# count, filled by `minigraph/ops/__init__.py` (which any `import minigraph...` runs).
FROM_OPS: dict[str, Callable[..., Any]] = {}


def input(name: str, shape: Sequence[int], dtype: Any = "float32") -> Tensor:  # noqa: A001
    """A graph input fed at run time (data, labels). Never reused by the planner."""
    return Tensor(name, shape, dtype, "input")


def param(name: str, shape: Sequence[int], init: Any = "normal", dtype: Any = "float32",
          scale: float | None = None) -> Tensor:
    """A trainable parameter. `init`: "normal" (scaled by fan-in), "zeros", "ones", or an array."""
    if isinstance(init, str) and init not in ("normal", "zeros", "ones", "uniform"):
        raise GraphError(f"param {name}: unknown init {init!r}")
    if not isinstance(init, str) and np.shape(init) != tuple(shape):
        raise GraphError(f"param {name}: init array shape {np.shape(init)} != {tuple(shape)}")
    return Tensor(name, shape, dtype, "param", init=(init, scale))


def constant(value: Any, name: str | None = None, dtype: Any = None) -> Tensor:
    """A constant stored in the graph (not reused, like GE's Const)."""
    name = name or _auto_name("const")
    dtype = as_dtype(dtype, name) if dtype is not None else None
    try:
        arr = np.array(value, dtype=dtype if dtype is not None else
                       (np.float32 if np.asarray(value).dtype.kind == "f" else None))
    except (TypeError, ValueError) as e:     # ragged lists, strings
        raise GraphError(f"constant {name}: the value is not an array of numbers ({e})") \
            from None
    return Tensor(name, arr.shape, arr.dtype, "const", value=arr)


def make_call(op: str, inputs: Sequence[Tensor], attrs: dict, out_specs: Sequence[tuple],
              name: str | None = None) -> tuple[Tensor, ...]:
    """Record one node; `out_specs` are the (shape, dtype) pairs the shape rule inferred."""
    for t in inputs:
        if not isinstance(t, Tensor):
            raise GraphError(f"{op}: input {t!r} is not a Tensor")
    call = Call(op, attrs, tuple(inputs), name or _auto_name(op), _role)
    kind = {"forward": "activation", "backward": "gradient", "update": "updated"}[_role]
    outs = []
    for i, (shape, dtype) in enumerate(out_specs):
        tname = call.name if i == 0 else f"{call.name}:{i}"
        outs.append(Tensor(tname, shape, dtype, kind, call=call, index=i))
    call.outputs = tuple(outs)
    return call.outputs


def add_control_deps(t: Tensor, after: Sequence[Tensor]) -> None:
    """Make the node producing `t` run after the producers of `after` (write-after-read)."""
    if t.call is None:
        raise GraphError(f"{t.name} is a leaf; only op outputs take control dependencies")
    t.call.deps = t.call.deps + tuple(a.call for a in after if a.call is not None)


def check_same_dtype(op: str, *ts: Tensor) -> str:
    dts = {t.dtype for t in ts}
    if len(dts) > 1:
        raise DTypeError(f"{op}({', '.join(f'{t.name}[{t.dtype}]' for t in ts)}): "
                         "operands must have the same dtype")
    return ts[0].dtype

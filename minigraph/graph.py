"""Symbolic tensors while you build, and the immutable `Graph` value they become.

Building works on `Tensor` handles: `mg.input`, `mg.param`, `mg.constant` make leaves, and
every op call makes a new node whose outputs are new handles (shapes and dtypes are
inferred right there, so a mismatch fails at the line that caused it). `Graph(outputs)`
then freezes everything reachable into plain data: nodes and tensors referring to each
other by *name*. Planners, the executor and the drawing only ever read that data.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from .errors import CycleError, DTypeError, GraphError, ShapeError

# ---------------------------------------------------------------------------------------
# Building: tensor handles
# ---------------------------------------------------------------------------------------

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


def current_role() -> str:
    return _role


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
    def __add__(self, o): return _ops().add(self, o)
    def __radd__(self, o): return _ops().add(o, self)
    def __sub__(self, o): return _ops().sub(self, o)
    def __rsub__(self, o): return _ops().sub(o, self)
    def __mul__(self, o): return _ops().mul(self, o)
    def __rmul__(self, o): return _ops().mul(o, self)
    def __truediv__(self, o): return _ops().div(self, o)
    def __rtruediv__(self, o): return _ops().div(o, self)
    def __neg__(self): return _ops().neg(self)
    def __pow__(self, p): return _ops().pow(self, p)
    def __matmul__(self, o): return _ops().matmul(self, o)
    def __rmatmul__(self, o): return _ops().matmul(o, self)
    def __getitem__(self, idx): return _ops().getitem(self, idx)

    @property
    def T(self) -> Tensor:
        return _ops().transpose(self)

    def reshape(self, *shape) -> Tensor:
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return _ops().reshape(self, shape)

    def sum(self, axis=None, keepdims=False) -> Tensor:
        return _ops().sum(self, axis=axis, keepdims=keepdims)

    def mean(self, axis=None, keepdims=False) -> Tensor:
        return _ops().mean(self, axis=axis, keepdims=keepdims)


def _ops():
    from . import ops
    return ops


def input(name: str, shape: Sequence[int], dtype: Any = "float32") -> Tensor:  # noqa: A001
    """A graph input fed at run time (data, labels). Never reused by the planner."""
    return Tensor(name, shape, dtype, "input")


def param(name: str, shape: Sequence[int], init: Any = "normal", dtype: Any = "float32",
          scale: float | None = None) -> Tensor:
    """A trainable parameter. `init`: "normal" (scaled by fan-in), "zeros", "ones", or an array."""
    if isinstance(init, str) and init not in ("normal", "zeros", "ones", "uniform"):
        raise GraphError(f"param {name}: unknown init {init!r}")
    if not isinstance(init, str):
        arr = np.asarray(init)
        if arr.shape != tuple(shape):
            raise GraphError(f"param {name}: init array shape {arr.shape} != {tuple(shape)}")
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


# ---------------------------------------------------------------------------------------
# The frozen graph: plain data by name
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TensorInfo:
    """What the graph knows of a tensor. `kind`: input, param, const, activation, gradient,
    updated (a parameter's new value, written over the parameter in place)."""
    name: str
    shape: tuple[int, ...]
    dtype: str
    kind: str
    producer: str | None = None
    index: int = 0
    value: Any = field(default=None, repr=False, compare=False)
    init: Any = field(default=None, repr=False, compare=False)
    alias_of: str | None = None   # for "updated": the parameter it overwrites

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize

    @property
    def is_leaf(self) -> bool:
        return self.producer is None

    def spec(self) -> str:
        return f"{self.name}[{','.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class Node:
    """One op application. Inputs, outputs and control dependencies are names."""
    name: str
    op: str
    attrs: tuple = ()
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    role: str = "forward"
    deps: tuple[str, ...] = ()

    @property
    def attr(self) -> dict:
        return dict(self.attrs)


def _freeze(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    return v


class Graph:
    """An immutable graph: nodes in a stable topological order, tensors by name.

    `Graph(outputs)` collects everything the outputs depend on. Iterating yields nodes in
    order; `len(graph)` is the number of nodes; `print(graph)` gives a one-screen summary.
    """

    def __init__(self, outputs: Sequence[Tensor] | Tensor, name: str = "graph"):
        if isinstance(outputs, Tensor):
            outputs = [outputs]
        calls: dict[int, Call] = {}
        leaves: dict[int, Tensor] = {}
        stack = list(outputs)
        stack_calls: list[Call] = []
        while stack or stack_calls:
            if stack:
                t = stack.pop()
                if t.call is None:
                    leaves[id(t)] = t
                    continue
                c = t.call
            else:
                c = stack_calls.pop()
            if id(c) in calls:
                continue
            calls[id(c)] = c
            stack.extend(c.inputs)
            stack_calls.extend(c.deps)
        ordered = sorted(calls.values(), key=lambda c: c.seq)
        tensors: dict[str, TensorInfo] = {}

        def put(info: TensorInfo) -> None:
            if info.name in tensors:
                raise GraphError(f"two different tensors are named {info.name!r}; "
                                 "give one of them another name")
            tensors[info.name] = info

        for t in sorted(leaves.values(), key=lambda t: t.seq):
            put(TensorInfo(t.name, t.shape, t.dtype, t.kind, value=t.value, init=t.init))
        nodes = []
        for c in ordered:
            alias = c.attrs.get("_alias_of")
            for t in c.outputs:
                put(TensorInfo(t.name, t.shape, t.dtype, t.kind, producer=c.name, index=t.index,
                               alias_of=c.inputs[alias].name
                               if alias is not None and t.index == 0 else None))
            attrs = _freeze({k: v for k, v in c.attrs.items() if not k.startswith("_")})
            nodes.append(Node(c.name, c.op, attrs, tuple(t.name for t in c.inputs),
                              tuple(t.name for t in c.outputs), c.role,
                              tuple(d.name for d in c.deps)))
        self._init(name, nodes, tensors, tuple(t.name for t in outputs))

    # A second constructor from plain data, used by rewire() and by random-graph generators.
    @classmethod
    def from_nodes(cls, nodes: Sequence[Node], tensors: Mapping[str, TensorInfo],
                   outputs: Sequence[str], name: str = "graph") -> Graph:
        """Build from plain `Node`/`TensorInfo` data; sorts topologically, rejects cycles.

        The data is checked first (GraphError or ShapeError naming the tensor or node):
        each tensor is written by exactly the one node its `producer` names, and only
        inputs, parameters and constants have no producer."""
        nodes = list(nodes)
        _check_plain_data(nodes, tensors)
        g = cls.__new__(cls)
        g._init(name, _toposort(nodes, tensors), dict(tensors), tuple(outputs))
        return g

    def _init(self, name: str, nodes: list[Node], tensors: dict[str, TensorInfo],
              outputs: tuple[str, ...]) -> None:
        self.name = name
        self.nodes: tuple[Node, ...] = tuple(nodes)
        self.tensors: Mapping[str, TensorInfo] = MappingProxyType(tensors)
        self.outputs = outputs
        self.node_index = MappingProxyType({n.name: i for i, n in enumerate(nodes)})
        if len(self.node_index) != len(nodes):
            raise GraphError("two nodes share a name")
        consumers: dict[str, list[str]] = {t: [] for t in tensors}
        for n in nodes:
            for i in n.inputs:
                if i not in tensors:
                    raise GraphError(f"node {n.name} reads unknown tensor {i!r}")
                if n.name not in consumers[i]:
                    consumers[i].append(n.name)
        for o in outputs:
            if o not in tensors:
                raise GraphError(f"graph output {o!r} is not a tensor of the graph")
        self.consumers: Mapping[str, tuple[str, ...]] = MappingProxyType(
            {k: tuple(v) for k, v in consumers.items()})

    # Reading --------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def node(self, name: str) -> Node:
        try:
            return self.nodes[self.node_index[name]]
        except KeyError:
            raise GraphError(f"no node named {name!r} in {self.name}") from None

    def tensor(self, name: str) -> TensorInfo:
        try:
            return self.tensors[name]
        except KeyError:
            raise GraphError(f"no tensor named {name!r} in {self.name}") from None

    def leaves(self, *kinds: str) -> list[TensorInfo]:
        return [t for t in self.tensors.values() if t.is_leaf and (not kinds or t.kind in kinds)]

    @property
    def inputs(self) -> list[str]:
        return [t.name for t in self.leaves("input")]

    @property
    def params(self) -> list[str]:
        return [t.name for t in self.leaves("param")]

    def producer(self, tensor: str) -> Node | None:
        p = self.tensor(tensor).producer
        return None if p is None else self.node(p)

    def bytes_by_kind(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tensors.values():
            if t.alias_of is None:
                out[t.kind] = out.get(t.kind, 0) + t.nbytes
        return out

    def flops(self) -> int:
        from .ops import flops_of
        return sum(flops_of(self, n) for n in self.nodes)

    # Editing returns a new graph -------------------------------------------------------
    def rewire(self, node: str, input_index: int, tensor: str) -> Graph:
        """A copy in which input `input_index` of `node` reads `tensor` instead.

        Raises CycleError when `tensor` depends on `node` (the edit would close a loop).
        """
        n = self.node(node)
        t = self.tensor(tensor)
        if isinstance(input_index, bool) or not hasattr(type(input_index), "__index__") \
                or not 0 <= input_index < len(n.inputs):      # -1 would pick the last input
            raise GraphError(f"rewire {node}: no input {input_index!r}; it has "
                             f"{len(n.inputs)}, numbered 0..{len(n.inputs) - 1}")
        old = self.tensor(n.inputs[input_index])
        if (t.shape, t.dtype) != (old.shape, old.dtype):
            raise ShapeError(f"rewire {node}: input {input_index} is {old.spec()} "
                             f"{old.dtype}, {t.spec()} {t.dtype} does not fit")
        ins = list(n.inputs)
        ins[input_index] = tensor
        nodes = [Node(n.name, n.op, n.attrs, tuple(ins), n.outputs, n.role, n.deps)
                 if m.name == node else m for m in self.nodes]
        return Graph.from_nodes(nodes, dict(self.tensors), self.outputs, self.name)

    # Printing ---------------------------------------------------------------------------
    def summary(self) -> str:
        roles: dict[str, int] = {}
        for n in self.nodes:
            roles[n.role] = roles.get(n.role, 0) + 1
        kb = self.bytes_by_kind()
        lines = [f"Graph {self.name!r}: {len(self.nodes)} nodes "
                 f"({', '.join(f'{v} {k}' for k, v in roles.items())}), "
                 f"{len(self.tensors)} tensors, {self.flops():,} FLOPs"]
        lines.append("  bytes: " + ", ".join(f"{k} {fmt_bytes(v)}" for k, v in sorted(kb.items())))
        shown = self.nodes if len(self.nodes) <= 16 else self.nodes[:8] + self.nodes[-6:]
        for i, n in enumerate(shown):
            if len(self.nodes) > 16 and i == 8:
                lines.append(f"  ... {len(self.nodes) - 14} more nodes ...")
            outs = ", ".join(self.tensors[o].spec() for o in n.outputs)
            lines.append(f"  {n.role[0]} {outs} = {n.op}({', '.join(n.inputs)})")
        lines.append(f"  outputs: {', '.join(self.outputs)}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return f"<Graph {self.name!r}: {len(self.nodes)} nodes, {len(self.tensors)} tensors>"


def fmt_bytes(n: float) -> str:
    """Bytes for people: "512 B", then KiB, MiB, GiB (powers of 1024) with two decimals."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} GiB"


LEAF_KINDS = ("input", "param", "const")
_KINDS = LEAF_KINDS + ("activation", "gradient", "updated")


def _check_plain_data(nodes: list[Node], tensors: Mapping[str, TensorInfo]) -> None:
    """GraphError/ShapeError unless the plain data describes a graph the executor can run:
    one writer per tensor (else the last writer would win), a producer for every tensor
    that is not a leaf (else it is read uninitialised), producers that exist."""
    writer: dict[str, str] = {}
    for n in nodes:
        for o in n.outputs:
            if o in writer:
                raise GraphError(f"tensor {o!r} is written by two nodes, {writer[o]} and "
                                 f"{n.name}; each tensor has one producer")
            writer[o] = n.name
    for key, t in tensors.items():
        if not isinstance(t, TensorInfo) or t.name != key:
            raise GraphError(f"tensors[{key!r}] must be the TensorInfo named {key!r}, "
                             f"not {t!r}")
        as_shape(t.shape, as_dtype(t.dtype, key), key)
        if t.kind not in _KINDS:
            raise GraphError(f"tensor {key!r} has unknown kind {t.kind!r}; kinds: "
                             f"{', '.join(_KINDS)}")
        if t.producer is None:
            if t.kind not in LEAF_KINDS:
                raise GraphError(f"{t.kind} {key!r} has no producer: only inputs, "
                                 "parameters and constants are leaves (name the node that "
                                 "writes it, or make it an input)")
            if key in writer:
                raise GraphError(f"{t.kind} {key!r} is written by node {writer[key]}")
            if t.kind == "const" and np.shape(t.value) != tuple(t.shape):
                raise GraphError(f"constant {key!r} needs a value of shape {list(t.shape)}")
        elif writer.get(key) != t.producer:
            found = f"node {writer[key]} writes it" if key in writer else "no node writes it"
            raise GraphError(f"tensor {key!r} names producer {t.producer!r}, but {found}")
        if t.alias_of is not None and t.alias_of not in tensors:
            raise GraphError(f"tensor {key!r} overwrites unknown tensor {t.alias_of!r}")


def _toposort(nodes: list[Node], tensors: Mapping[str, TensorInfo]) -> list[Node]:
    """Kahn's algorithm, ties broken by the given order; names the cycle if there is one."""
    by_name = {n.name: n for n in nodes}
    producer = {}
    for n in nodes:
        for o in n.outputs:
            if o not in tensors:
                raise GraphError(f"node {n.name} writes tensor {o!r} that has no TensorInfo")
            producer[o] = n.name
    preds: dict[str, set[str]] = {n.name: set() for n in nodes}
    for n in nodes:
        for i in n.inputs:
            if i not in tensors:
                raise GraphError(f"node {n.name} reads unknown tensor {i!r}")
            if i in producer:
                preds[n.name].add(producer[i])
        for d in n.deps:
            if d not in by_name:
                raise GraphError(f"node {n.name} depends on unknown node {d!r}")
            preds[n.name].add(d)
    rank = {n.name: k for k, n in enumerate(nodes)}
    succs: dict[str, list[str]] = {n.name: [] for n in nodes}
    for v, ps in preds.items():
        for p in ps:
            succs[p].append(v)
    import heapq
    indeg = {v: len(ps) for v, ps in preds.items()}
    ready = [(rank[v], v) for v, d in indeg.items() if d == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, v = heapq.heappop(ready)
        out.append(by_name[v])
        for s in succs[v]:
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(ready, (rank[s], s))
    if len(out) < len(nodes):
        raise CycleError("the graph would have a cycle: " + " -> ".join(_find_cycle(preds)))
    return out


def _find_cycle(preds: dict[str, set[str]]) -> list[str]:
    """One cycle among the nodes left over by Kahn's algorithm (iterative DFS)."""
    color = dict.fromkeys(preds, 0)
    for root in preds:
        if color[root]:
            continue
        path, iters = [root], [iter(sorted(preds[root]))]
        color[root] = 1
        while path:
            nxt = next(iters[-1], None)
            if nxt is None:
                color[path.pop()] = 2
                iters.pop()
            elif color[nxt] == 1:
                cyc = path[path.index(nxt):] + [nxt]
                return cyc[::-1]
            elif color[nxt] == 0:
                color[nxt] = 1
                path.append(nxt)
                iters.append(iter(sorted(preds[nxt])))
    return []


def check_same_dtype(op: str, *ts: Tensor) -> str:
    dts = {t.dtype for t in ts}
    if len(dts) > 1:
        raise DTypeError(f"{op}({', '.join(f'{t.name}[{t.dtype}]' for t in ts)}): "
                         "operands must have the same dtype")
    return ts[0].dtype

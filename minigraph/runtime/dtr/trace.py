"""Op traces in the JSON-lines format of the DTR authors' simulator (uwsampl/dtr-prototype,
`simrd`), replayed through our runtime in simulated mode; and minigraph graphs written out
in that format.

One JSON object per line, keyed by "INSTRUCTION":

    {"INSTRUCTION": "CONSTANT", "NAME": "w"}                 a tensor given from outside,
    {"INSTRUCTION": "MEMORY", "NAME": "w", "MEMORY": "4096"}  followed by its bytes
    {"INSTRUCTION": "CALL", "NAME": "conv", "ARGS": ["x", "w"], "RESULT": ["y"],
     "TIME": "1200"}                                          an op, then for each result:
    {"INSTRUCTION": "MEMORY", "NAME": "y", "MEMORY": "8192"}  its bytes and
    {"INSTRUCTION": "ALIAS", "NAME": "y", "ALIAS": "-1"}      the argument it aliases (-1: none)
    {"INSTRUCTION": "COPY", "DST": "y2", "SRC": "y"}          a new reference to a tensor
    {"INSTRUCTION": "COPY_FROM", "DST": "a", "SRC": "b"}      a now refers to b's tensor
    {"INSTRUCTION": "RELEASE", "NAME": "y"}                   a reference dropped
    {"INSTRUCTION": "MUTATE", "NAME": "add_", "ARGS": [...], "MUTATE": [0], "TIME": "5"}
    {"INSTRUCTION": "ANNOTATE", "ANNOTATION": "START" | "BACKWARD"}

Replay follows simrd's parser: lines before ANNOTATE START are skipped (if there is one);
a MUTATE is run out of place (new versions of the mutated arguments, the old ones released);
an ALIAS result shares its argument's storage (it has no bytes of its own and reading it
needs that storage resident); tensors still referenced at the end are outputs, made
resident at the end (simrd's REMATERIALIZE condition). Budget semantics are ours:
CONSTANTs are outside the budget (like parameters), everything an op makes is inside.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import GraphError
from ...graph import Graph
from ...memory.buffers import align_up
from .options import DTROptions, dtr_options
from .program import CostSpec, OpSpec, Program, TensorSpec, node_costs, resolve_budget
from .record import DTRTrace
from .runtime import DTRRuntime


class TraceError(GraphError):
    """A malformed line or an inconsistent instruction in a DTR simulator trace."""


def _lines(source: Any) -> tuple[str, list[tuple[int, dict]]]:
    """(where the trace came from, for messages; its instructions with their line
    numbers). A Path, or a one-line string not starting with "{", is a file's path."""
    where = "trace"
    if isinstance(source, Path) or isinstance(source, str) and "\n" not in source \
            and not source.lstrip().startswith("{"):
        where = str(source)
        path = Path(source)
        if not where.strip():
            raise TraceError("trace: the empty string is neither a trace nor a file's path")
        if path.is_dir():
            raise TraceError(f"trace {where}: is a directory, not a trace file")
        if not path.is_file():
            raise TraceError(f"trace {where}: no such file")
        try:
            text = path.read_text().splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise TraceError(f"trace {where}: cannot be read ({e})") from None
    elif isinstance(source, str):
        text = source.splitlines()
    elif isinstance(source, io.IOBase) or hasattr(source, "read"):
        text = source.read().splitlines()
    else:
        text = list(source)
    out = []
    for k, line in enumerate(text, 1):
        if not isinstance(line, dict):
            line = line.strip()
            if not line:
                continue
            try:
                line = json.loads(line)
            except json.JSONDecodeError as e:
                raise TraceError(f"{where} line {k}: not JSON ({e}): {line[:80]}") from None
        if not isinstance(line, dict):
            raise TraceError(f"{where} line {k}: a JSON {type(line).__name__}, not an "
                             f"object with an INSTRUCTION: {str(line)[:80]}")
        if "INSTRUCTION" not in line:
            raise TraceError(f"{where} line {k}: no INSTRUCTION: {str(line)[:80]}")
        out.append((k, line))
    if not out:
        raise TraceError(f"{where}: no instructions (an empty trace)")
    return where, out


def parse_trace(source: Any, alignment: int = 1, name: str = "trace",
                outputs: str = "rematerialize") -> Program:
    """A `Program` from a DTR simulator trace (a path, the text, a file, or lines/dicts).

    `outputs`: "rematerialize" (tensors referenced at the end are made resident at the
    end, as simrd does by default) or "ignore"."""
    if outputs not in ("rematerialize", "ignore"):
        raise TraceError(f"outputs must be 'rematerialize' or 'ignore', not {outputs!r}")
    where, lines = _lines(source)
    starts = [k for k, (_, j) in enumerate(lines) if j["INSTRUCTION"] == "ANNOTATE"
              and j.get("ANNOTATION") == "START"]
    reader = _TraceReader(lines[starts[0] + 1:] if starts else lines, alignment)
    try:
        reader.read()
    except TraceError as e:
        raise TraceError(f"{where} line {reader.line}: {e}") from None
    if outputs == "rematerialize":
        reader.get_outputs()
    return Program(reader.tensors, reader.ops, reader.steps, name)


class _TraceReader:
    """Reads trace lines into tensors, ops and steps, one instruction at a time, keeping
    each tensor's references (`refs`) and the storage it lives in (`root`: itself, or
    the tensor it aliases)."""

    def __init__(self, lines: list[tuple[int, dict]], alignment: int):
        self.numbers = [n for n, _ in lines]
        self.lines = [j for _, j in lines]
        self.alignment, self.k, self.line = alignment, 0, 0
        self.tensors: list[TensorSpec] = []
        self.ops: list[OpSpec] = []
        self.steps: list[tuple[str, int]] = []
        self.binding: dict[str, int] = {}        # live name -> tensor index
        self.refs: list[int] = []                # references to each tensor
        self.root: list[int] = []                # storage owner
        self.role = "forward"

    def read(self) -> None:
        while self.k < len(self.lines):
            j = self.lines[self.k]
            self.line = self.numbers[self.k]
            self.k += 1
            ins = j["INSTRUCTION"]
            if ins == "CONSTANT":
                name = _name(j, "NAME")
                self.number(self.pop("MEMORY", name), "MEMORY", int)
                self.binding[name] = self.new_tensor(name, 0, True, -1, None)
            elif ins == "CALL":
                self.call(j)
            elif ins == "MUTATE":
                self.mutate(j)
            elif ins in ("COPY", "COPY_FROM"):
                src = self.need(_name(j, "SRC"), ins)
                dst = _name(j, "DST")
                old = self.need(dst, ins) if ins == "COPY_FROM" else None
                self.binding[dst] = src
                self.refs[src] += 1
                if old is not None:
                    self.release(old)
            elif ins == "RELEASE":
                if _name(j, "NAME") in self.binding:
                    self.release(self.binding.pop(j["NAME"]))
            elif ins == "ANNOTATE":
                if j.get("ANNOTATION") == "BACKWARD":
                    self.role = "backward"
            elif ins in ("MEMORY", "ALIAS"):
                raise TraceError(f"{ins} line for {j.get('NAME')!r} outside a CALL or CONSTANT")
            elif ins != "PIN":
                raise TraceError(f"unknown INSTRUCTION {ins!r}")

    def call(self, j: dict) -> None:
        """An op: its results, each with a MEMORY and an ALIAS line."""
        name, cost = _name(j, "NAME"), self.cost(j)
        args = [self.need(a, f"CALL {name}") for a in _names(j, "ARGS")]
        idx = len(self.ops)
        outs = []
        for r in _names(j, "RESULT"):
            mem = self.number(self.pop("MEMORY", r), "MEMORY", int)
            alias = self.number(self.pop("ALIAS", r), "ALIAS", int, low=-1)
            if r in self.binding:
                raise TraceError(f"CALL {j['NAME']}: result {r!r} already exists")
            if alias >= 0:
                if alias >= len(args):
                    raise TraceError(f"{r}: ALIAS {alias} but {j['NAME']} has "
                                     f"{len(args)} arguments")
                t = self.new_tensor(r, 0, True, idx, self.root[args[alias]])
            else:
                t = self.new_tensor(r, align_up(mem, self.alignment), mem == 0, idx, None)
            self.binding[r] = t
            outs.append(t)
        self.add_op(j, args, outs, cost)

    def mutate(self, j: dict) -> None:
        """An in-place op, run out of place: new versions of the mutated arguments, the old
        ones released after it."""
        name, names, cost = _name(j, "NAME"), _names(j, "ARGS"), self.cost(j)
        args = [self.need(a, f"MUTATE {name}") for a in names]
        idx = len(self.ops)
        outs, olds = [], []
        for m in _field(j, "MUTATE", list):
            if isinstance(m, bool) or not isinstance(m, int) or not 0 <= m < len(args):
                raise TraceError(f"MUTATE {j['NAME']}: index {m!r} is not one of its "
                                 f"{len(args)} arguments (0 to {len(args) - 1})")
            old = args[m]
            base = self.root[old]
            size = self.tensors[base].size
            outs.append(self.new_tensor(self.tensors[old].name + "$", size,
                                        self.tensors[base].external and size == 0, idx, None))
            olds.append((names[m], old))
        self.add_op(j, args, outs, cost)
        for (nm, old), t in zip(olds, outs):
            self.binding[nm] = t
            self.release(old)

    def add_op(self, j: dict, args: list[int], outs: list[int], cost: float) -> None:
        idx = len(self.ops)
        self.ops.append(OpSpec(f"{j['NAME']}#{idx}", self.op_inputs(args), tuple(outs),
                               cost, 0, True, (), tuple(args), None,
                               self.role))
        self.steps.append(("call", idx))

    def get_outputs(self) -> None:
        """Tensors still referenced at the end are made resident then (simrd's default)."""
        for t in sorted({self.root[t] for t in self.binding.values()}):
            if not self.tensors[t].external and self.refs[t] > 0:
                self.steps.append(("get", t))

    # helpers ------------------------------------------------------------------------------
    def new_tensor(self, nm: str, size: int, external: bool, producer: int,
                   r: int | None) -> int:
        t = len(self.tensors)
        self.tensors.append(TensorSpec(nm, size, external, producer, "trace"))
        self.refs.append(1)
        self.root.append(t if r is None else r)
        if r is not None:
            self.refs[r] += 1                # an alias keeps its storage alive
        return t

    def release(self, t: int) -> None:
        self.refs[t] -= 1
        if self.refs[t] == 0:
            self.steps.append(("release", t))
            if self.root[t] != t:
                self.release(self.root[t])
        elif self.refs[t] < 0:
            raise TraceError(f"tensor {self.tensors[t].name} released more often than "
                             f"referenced")

    def need(self, nm: str, where: str) -> int:
        if nm not in self.binding:
            raise TraceError(f"{where}: unknown tensor {nm!r}")
        return self.binding[nm]

    def pop(self, kind: str, nm: str) -> dict:
        """The next line, which must be a `kind` line for `nm`."""
        lines, k = self.lines, self.k
        if k < len(lines):
            self.line = self.numbers[k]
        if k >= len(lines) or lines[k]["INSTRUCTION"] != kind:
            got = lines[k]["INSTRUCTION"] if k < len(lines) else "the end"
            raise TraceError(f"expected {kind} for {nm} after its CALL, got {got}")
        j = lines[k]
        self.k += 1
        if j.get("NAME") != nm:
            raise TraceError(f"{kind} line names {j.get('NAME')!r}, expected {nm!r}")
        return j

    def cost(self, j: dict) -> float:
        return self.number(j, "TIME", float) if "TIME" in j else 0.0

    def number(self, j: dict, key: str, kind: type, low: float = 0) -> Any:
        """j[key] as an int or a float (the trace writes numbers as strings), finite and
        at least `low`."""
        v = _field(j, key, (str, int, float))
        try:
            x = None if isinstance(v, bool) else kind(v)
            if kind is int and isinstance(v, float) and not v.is_integer():
                x = None
        except (ValueError, OverflowError):
            x = None
        if x is None or x != x or x in (math.inf, -math.inf):
            raise TraceError(f"{j['INSTRUCTION']} {j.get('NAME', '')}: {key} {v!r} is not "
                             f"{'an integer' if kind is int else 'a finite number'}")
        if x < low:
            raise TraceError(f"{j['INSTRUCTION']} {j.get('NAME', '')}: {key} {v!r} is "
                             f"below {low}")
        return x

    def op_inputs(self, args: Sequence[int]) -> tuple[int, ...]:
        ins: list[int] = []
        for a in args:
            ins.append(a)
            if self.root[a] != a:
                ins.append(self.root[a])     # reading a view needs its storage
        return tuple(dict.fromkeys(ins))


def _field(j: dict, key: str, kind: type | tuple[type, ...]) -> Any:
    if key not in j:
        raise TraceError(f"{j['INSTRUCTION']} line without {key!r}: {str(j)[:80]}")
    if not isinstance(j[key], kind):
        raise TraceError(f"{j['INSTRUCTION']}: {key} {j[key]!r} has the wrong type")
    return j[key]


def _name(j: dict, key: str) -> str:
    return _field(j, key, str)


def _names(j: dict, key: str) -> list[str]:
    names = _field(j, key, list)
    bad = [x for x in names if not isinstance(x, str)]
    if bad:
        raise TraceError(f"{j['INSTRUCTION']}: {key} holds {bad[0]!r}, not a tensor name")
    return names


def replay_trace(source: Any, budget: int | None = None, *, ratio: float | None = None,
                 ratio_of: str = "total", alignment: int = 1,
                 options: DTROptions | None = None, **keywords: Any) -> DTRTrace:
    """Replay a DTR simulator trace in simulated mode; returns the `DTRTrace`. `ratio`
    is of the total peak (the trace's constants + arena peak) or, `ratio_of="arena"`,
    of the arena peak. `alignment` rounds the trace's sizes; `options` (or their fields
    as keywords) as for `simulate`."""
    program = source if isinstance(source, Program) else parse_trace(source, alignment)
    b = resolve_budget(program, budget, ratio, ratio_of)
    return DTRRuntime(program, b, options=dtr_options(options, **keywords)).run()


def write_trace(graph: Graph, dest: Any = None, *, costs: CostSpec = "flops",
                schedule: Sequence[str] | None = None) -> list[str]:
    """`graph` as a DTR simulator trace (JSON lines); written to `dest` (a path or file)
    if given. Inputs, parameters and constants are CONSTANTs; every node is a CALL (TIME
    from `costs`); each tensor is RELEASEd after its last reader; graph outputs stay."""
    from ...memory.liveness import check_schedule
    order = check_schedule(graph, schedule) if schedule is not None else \
        tuple(n.name for n in graph.nodes)
    cost = node_costs(graph, costs)
    out: list[str] = [json.dumps({"INSTRUCTION": "ANNOTATE", "ANNOTATION": "START"})]
    for t in graph.leaves():
        out.append(json.dumps({"INSTRUCTION": "CONSTANT", "NAME": t.name}))
        out.append(json.dumps({"INSTRUCTION": "MEMORY", "NAME": t.name,
                               "MEMORY": str(t.nbytes)}))
    last: dict[str, str] = {}
    for name in order:
        for i in graph.node(name).inputs:
            last[i] = name
    keep = set(graph.outputs)
    in_bwd = False
    for name in order:
        node = graph.node(name)
        if node.role != "forward" and not in_bwd:
            in_bwd = True
            out.append(json.dumps({"INSTRUCTION": "ANNOTATE", "ANNOTATION": "BACKWARD"}))
        out.append(json.dumps({"INSTRUCTION": "CALL", "NAME": node.op,
                               "RESULT": list(node.outputs), "ARGS": list(node.inputs),
                               "TIME": str(int(round(cost[name])))}))
        for o in node.outputs:
            out.append(json.dumps({"INSTRUCTION": "MEMORY", "NAME": o,
                                   "MEMORY": str(graph.tensors[o].nbytes)}))
            out.append(json.dumps({"INSTRUCTION": "ALIAS", "NAME": o, "ALIAS": "-1"}))
        for t in dict.fromkeys(list(node.inputs) + list(node.outputs)):
            if t in keep:
                continue
            if last.get(t, graph.tensors[t].producer) == name:
                out.append(json.dumps({"INSTRUCTION": "RELEASE", "NAME": t}))
    if dest is not None:
        text = "\n".join(out) + "\n"
        if hasattr(dest, "write"):
            dest.write(text)
        else:
            Path(dest).write_text(text)
    return out


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


def _lines(source: Any) -> list[dict]:
    if isinstance(source, (str, Path)) and not str(source).lstrip().startswith("{") \
            and Path(source).exists():
        text = Path(source).read_text().splitlines()
    elif isinstance(source, str):
        text = source.splitlines()
    elif isinstance(source, io.IOBase) or hasattr(source, "read"):
        text = source.read().splitlines()
    else:
        text = list(source)
    out = []
    for k, line in enumerate(text, 1):
        if isinstance(line, dict):
            out.append(line)
            continue
        line = line.strip()
        if not line:
            continue
        try:
            j = json.loads(line)
        except json.JSONDecodeError as e:
            raise TraceError(f"trace line {k}: not JSON ({e}): {line[:80]}") from None
        if "INSTRUCTION" not in j:
            raise TraceError(f"trace line {k}: no INSTRUCTION: {line[:80]}")
        out.append(j)
    return out


def parse_trace(source: Any, alignment: int = 1, name: str = "trace",
                outputs: str = "rematerialize") -> Program:
    """A `Program` from a DTR simulator trace (a path, the text, a file, or lines/dicts).

    `outputs`: "rematerialize" (tensors referenced at the end are made resident at the
    end, as simrd does by default) or "ignore"."""
    if outputs not in ("rematerialize", "ignore"):
        raise ValueError(f"outputs must be 'rematerialize' or 'ignore', not {outputs!r}")
    lines = _lines(source)
    starts = [k for k, j in enumerate(lines) if j["INSTRUCTION"] == "ANNOTATE"
              and j.get("ANNOTATION") == "START"]
    reader = _TraceReader(lines[starts[0] + 1:] if starts else lines, alignment)
    reader.read()
    if outputs == "rematerialize":
        reader.get_outputs()
    return Program(reader.tensors, reader.ops, reader.steps, name)


class _TraceReader:
    """Reads trace lines into tensors, ops and steps, one instruction at a time, keeping
    each tensor's references (`refs`) and the storage it lives in (`root`: itself, or
    the tensor it aliases)."""

    def __init__(self, lines: list[dict], alignment: int):
        self.lines, self.alignment, self.k = lines, alignment, 0
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
            self.k += 1
            ins = j["INSTRUCTION"]
            if ins == "CONSTANT":
                self.pop("MEMORY", j["NAME"])
                self.binding[j["NAME"]] = self.new_tensor(j["NAME"], 0, True, -1, None)
            elif ins == "CALL":
                self.call(j)
            elif ins == "MUTATE":
                self.mutate(j)
            elif ins in ("COPY", "COPY_FROM"):
                src = self.need(j["SRC"], ins)
                old = self.need(j["DST"], ins) if ins == "COPY_FROM" else None
                self.binding[j["DST"]] = src
                self.refs[src] += 1
                if old is not None:
                    self.release(old)
            elif ins == "RELEASE":
                if j["NAME"] in self.binding:
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
        args = [self.need(a, f"CALL {j['NAME']}") for a in j["ARGS"]]
        idx = len(self.ops)
        outs = []
        for r in list(j["RESULT"]):
            mem = int(self.pop("MEMORY", r)["MEMORY"])
            alias = int(self.pop("ALIAS", r)["ALIAS"])
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
        self.add_op(j, args, outs)

    def mutate(self, j: dict) -> None:
        """An in-place op, run out of place: new versions of the mutated arguments, the old
        ones released after it."""
        args = [self.need(a, f"MUTATE {j['NAME']}") for a in j["ARGS"]]
        idx = len(self.ops)
        outs, olds = [], []
        for m in j["MUTATE"]:
            old = args[int(m)]
            base = self.root[old]
            size = self.tensors[base].size
            outs.append(self.new_tensor(self.tensors[old].name + "$", size,
                                        self.tensors[base].external and size == 0, idx, None))
            olds.append((j["ARGS"][int(m)], old))
        self.add_op(j, args, outs)
        for (nm, old), t in zip(olds, outs):
            self.binding[nm] = t
            self.release(old)

    def add_op(self, j: dict, args: list[int], outs: list[int]) -> None:
        idx = len(self.ops)
        self.ops.append(OpSpec(f"{j['NAME']}#{idx}", self.op_inputs(args), tuple(outs),
                               float(j.get("TIME", 0)), 0, True, (), tuple(args), None,
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
        if k >= len(lines) or lines[k]["INSTRUCTION"] != kind:
            got = lines[k]["INSTRUCTION"] if k < len(lines) else "the end"
            raise TraceError(f"expected {kind} for {nm} after its CALL, got {got}")
        j = lines[k]
        self.k += 1
        if j.get("NAME") != nm:
            raise TraceError(f"{kind} line names {j.get('NAME')!r}, expected {nm!r}")
        return j

    def op_inputs(self, args: Sequence[int]) -> tuple[int, ...]:
        ins: list[int] = []
        for a in args:
            ins.append(a)
            if self.root[a] != a:
                ins.append(self.root[a])     # reading a view needs its storage
        return tuple(dict.fromkeys(ins))


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


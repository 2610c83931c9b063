"""The DTR authors' simulator's logs: op traces in the JSON-lines format of simrd
(uwsampl/dtr-prototype), read into a `Program` (not `minigraph.memory.online.trace`'s
alloc/free events). Replaying one is replay.py's; writing a graph as one, simrd_write.py's.

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

Reading follows simrd's parser: lines before ANNOTATE START are skipped (if there is one);
a MUTATE is run out of place (new versions of the mutated arguments, the old ones released);
an ALIAS result shares its argument's storage (it has no bytes of its own and reading it
needs that storage resident); tensors still referenced at the end are outputs, made
resident at the end (simrd's REMATERIALIZE condition).

Budget semantics are the authors' by default (`constants="inside"`): a CONSTANT is an op
of cost 0 at its own line whose output is pinned in the arena from then on (a RELEASE
does not free it), so a constant appearing mid-run is present only from its line; a
MUTATE of a constant makes a new, evictable tensor of the constant's bytes inside the
budget; `replay_trace(log, ratio=r)` gives the arena r x the baseline peak (the live
bytes of a run without eviction, constants included: simrd's `max_memory` of its
unbudgeted run, `ratio_of="baseline"`). `constants="outside"` is the old reading:
constants are 0-byte tensors outside the arena and the ratio is of the first-fit arena
peak (`ratio_of="total"`).
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import GraphError
from ..memory.buffers import align_up, alignment_value
from ..runtime.dtr.program import OpSpec, Program, TensorSpec


class SimrdLogError(GraphError):
    """A malformed line or an inconsistent instruction in a simrd log (a DTR trace)."""


def _lines(source: Any) -> tuple[str, list[tuple[int, dict]]]:
    """(where the trace came from, for messages; its instructions with line numbers).
    A Path, or a one-line string not starting with "{" or "[" (JSON), is a file's path."""
    where = "trace"
    if isinstance(source, Path) or isinstance(source, str) and "\n" not in source \
            and not source.lstrip().startswith(("{", "[")):
        where, path = str(source)[-80:], Path(source)    # a long path's end: its file's name
        if not where.strip():
            raise SimrdLogError("trace: the empty string is neither a trace nor a file's path")
        try:                       # is_dir() too raises OSError, for a name too long
            if not path.is_file():
                raise SimrdLogError(f"trace {where}: " + ("a directory, not a trace file" if
                                    path.is_dir() else "no such file (nor a JSON trace)"))
            text = path.read_text().splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise SimrdLogError(f"trace {where}: cannot be read "
                                f"({getattr(e, 'strerror', None) or e})") from None
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
                raise SimrdLogError(f"{where} line {k}: not JSON ({e}): {line[:80]}") from None
        if not isinstance(line, dict):
            raise SimrdLogError(f"{where} line {k}: a JSON {type(line).__name__}, not an "
                             f"object with an INSTRUCTION: {str(line)[:80]}")
        if "INSTRUCTION" not in line:
            raise SimrdLogError(f"{where} line {k}: no INSTRUCTION: {str(line)[:80]}")
        out.append((k, line))
    if not out:
        raise SimrdLogError(f"{where}: no instructions (an empty trace)")
    return where, out


CONSTANTS = ("inside", "outside")
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")   # ASCII only


def parse_trace(source: Any, alignment: int = 1, name: str = "trace",
                outputs: str = "rematerialize", constants: str = "inside") -> Program:
    """A `Program` from a DTR simulator trace (a path, the text, a file, or lines/dicts).

    `outputs`: "rematerialize" (tensors referenced at the end are made resident at the
    end, as simrd does by default) or "ignore". `constants`: "inside" (the authors'
    budget: a constant is pinned in the arena from its line on) or "outside" (0 bytes,
    outside the arena). The program also records each tensor's storage (`storage`: the
    tensor a view aliases, else itself) and simrd's end-of-run order (`pin_order`)."""
    if outputs not in ("rematerialize", "ignore"):
        raise SimrdLogError(f"outputs must be 'rematerialize' or 'ignore', not {outputs!r}")
    if constants not in CONSTANTS:
        raise SimrdLogError(f"constants must be 'inside' or 'outside', not {constants!r}")
    where, lines = _lines(source)
    starts = [k for k, (_, j) in enumerate(lines) if j["INSTRUCTION"] == "ANNOTATE"
              and j.get("ANNOTATION") == "START"]
    reader = _TraceReader(lines[starts[0] + 1:] if starts else lines, alignment,
                          constants == "inside")
    try:
        reader.read()
    except SimrdLogError as e:
        raise SimrdLogError(f"{where} line {reader.line}: {e}") from None
    if outputs == "rematerialize":
        reader.get_outputs()
    program = Program(reader.tensors, reader.ops, reader.steps, name)
    program.storage = list(reader.root)
    program.pin_order = reader.pin_order() if outputs == "rematerialize" else []
    program.baseline_peak = reader.baseline_peak()
    return program


class _TraceReader:
    """Reads trace lines into tensors, ops and steps, one instruction at a time, keeping
    each tensor's references (`refs`) and the storage it lives in (`root`: itself, or
    the tensor it aliases)."""

    def __init__(self, lines: list[tuple[int, dict]], alignment: int, inside: bool = True):
        self.inside = inside
        self.numbers = [n for n, _ in lines]
        self.lines = [j for _, j in lines]
        self.alignment, self.k, self.line = alignment_value(alignment), 0, 0
        self.tensors: list[TensorSpec] = []
        self.ops: list[OpSpec] = []
        self.steps: list[tuple[str, int]] = []
        self.binding: dict[str, int] = {}        # live name -> tensor index
        self.refs: list[int] = []                # references to each tensor
        self.own: list[int] = []                 # the same without its views' (simrd's _ref)
        self.names: dict[str, int] = {}          # every name ever bound (simrd's tensor_map)
        self.const_frees: list[tuple[int, int]] = []   # (step, constant) released there
        self.root: list[int] = []                # storage owner
        self.role = "forward"

    def read(self) -> None:
        while self.k < len(self.lines):
            j = self.lines[self.k]
            self.line = self.numbers[self.k]
            self.k += 1
            ins = j["INSTRUCTION"]
            if ins == "CONSTANT":
                self.constant(_name(j, "NAME"))
            elif ins == "CALL":
                self.call(j)
            elif ins == "MUTATE":
                self.mutate(j)
            elif ins in ("COPY", "COPY_FROM"):
                src = self.need(_name(j, "SRC"), ins)
                dst = _name(j, "DST")
                old = self.need(dst, ins) if ins == "COPY_FROM" else None
                self.bind(dst, src)
                self.refs[src] += 1
                self.own[src] += 1
                if old is not None:
                    self.release(old)
            elif ins == "RELEASE":
                self.release(self.need(_name(j, "NAME"), ins, pop=True))
            elif ins == "ANNOTATE":
                if j.get("ANNOTATION") == "BACKWARD":
                    self.role = "backward"
            elif ins in ("MEMORY", "ALIAS"):
                raise SimrdLogError(f"{ins} line for {j.get('NAME')!r} outside a CALL or CONSTANT")
            elif ins != "PIN":
                raise SimrdLogError(f"unknown INSTRUCTION {ins!r}")

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
                raise SimrdLogError(f"CALL {j['NAME']}: result {r!r} already exists")
            if alias >= 0:
                if alias >= len(args):
                    raise SimrdLogError(f"{r}: ALIAS {alias} but {j['NAME']} has "
                                     f"{len(args)} arguments")
                t = self.new_tensor(r, 0, True, idx, self.root[args[alias]])
            else:
                t = self.new_tensor(r, align_up(mem, self.alignment), mem == 0, idx, None)
            self.bind(r, t)
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
                raise SimrdLogError(f"MUTATE {j['NAME']}: index {m!r} is not one of its "
                                 f"{len(args)} arguments (0 to {len(args) - 1})")
            old = args[m]
            base = self.root[old]
            size = self.tensors[base].size
            outs.append(self.new_tensor(self.tensors[old].name + "$", size,
                                        self.tensors[base].external and size == 0, idx, None))
            olds.append((names[m], old))
        self.add_op(j, args, outs, cost)
        for (nm, old), t in zip(olds, outs):
            self.bind(nm, t)
            self.release(old)

    def add_op(self, j: dict, args: list[int], outs: list[int], cost: float) -> None:
        idx = len(self.ops)
        self.ops.append(OpSpec(f"{j['NAME']}#{idx}", self.op_inputs(args), tuple(outs),
                               cost, 0, True, (), tuple(args), None,
                               self.role))
        self.steps.append(("call", idx))

    def constant(self, name: str) -> None:
        """A CONSTANT and its MEMORY line: inside, an op of cost 0 at this line whose
        output can never be evicted; outside, a 0-byte tensor given from the start."""
        mem = self.number(self.pop("MEMORY", name), "MEMORY", int)
        if name in self.binding:
            raise SimrdLogError(f"CONSTANT {name!r} already exists")
        if not self.inside:
            self.bind(name, self.new_tensor(name, 0, True, -1, None))
            return
        idx = len(self.ops)
        t = self.new_tensor(name, align_up(mem, self.alignment), mem == 0, idx, None,
                            "constant")
        self.ops.append(OpSpec(f"constant#{idx}", (), (t,), 0.0, 0, False, (), (), None,
                               self.role))
        self.steps.append(("call", idx))
        self.bind(name, t)

    def bind(self, nm: str, t: int) -> None:
        self.binding[nm] = t
        self.names[nm] = t

    def get_outputs(self) -> None:
        """Tensors still referenced at the end are made resident then (simrd's default)."""
        for t in sorted({self.root[t] for t in self.binding.values()}):
            if not self.tensors[t].external and self.refs[t] > 0 and \
                    self.tensors[t].kind != "constant":
                self.steps.append(("get", t))

    def baseline_peak(self) -> int:
        """simrd's baseline peak (`max_memory` of RuntimeV1 with no budget): the live bytes
        after each op, every storage freed when its last reference goes, constants
        included (and freed at their release, although a budgeted run pins them)."""
        frees: dict[int, list[int]] = {}
        for at, t in self.const_frees:
            frees.setdefault(at, []).append(t)
        live = best = 0
        size = [t.size for t in self.tensors]
        for k, (kind, x) in enumerate(self.steps + [("end", -1)]):
            for t in frees.get(k, ()):
                live -= size[t]
            if kind == "call":
                live += sum(size[o] for o in self.ops[x].outputs)
                best = max(best, live)
            elif kind == "release":
                live -= size[x]
        return best

    def pin_order(self) -> list[int]:
        """simrd's outputs: every name's tensor still referenced, in the order the names
        were first bound (views themselves, not their storage)."""
        return [t for t in self.names.values() if self.own[t] > 0]

    # helpers ------------------------------------------------------------------------------
    def new_tensor(self, nm: str, size: int, external: bool, producer: int,
                   r: int | None, kind: str = "trace") -> int:
        t = len(self.tensors)
        self.tensors.append(TensorSpec(nm, size, external, producer, kind))
        self.refs.append(1)
        self.own.append(1)
        self.root.append(t if r is None else r)
        if r is not None:
            self.refs[r] += 1                # an alias keeps its storage alive
        return t

    def release(self, t: int, own: bool = True) -> None:
        self.refs[t] -= 1
        self.own[t] -= own
        if self.refs[t] == 0:
            if self.tensors[t].kind != "constant":      # pinned to the end, as in simrd
                self.steps.append(("release", t))
            else:                        # ... but freed in simrd's unbudgeted baseline run
                self.const_frees.append((len(self.steps), t))
            if self.root[t] != t:
                self.release(self.root[t], own=False)
        elif self.refs[t] < 0:
            raise SimrdLogError(f"tensor {self.tensors[t].name} released more often than "
                             f"referenced")

    def need(self, nm: str, where: str, pop: bool = False) -> int:
        if nm not in self.binding:
            raise SimrdLogError(f"{where}: unknown tensor {nm!r}")
        return self.binding.pop(nm) if pop else self.binding[nm]

    def pop(self, kind: str, nm: str) -> dict:
        """The next line, which must be a `kind` line for `nm`."""
        lines, k = self.lines, self.k
        if k < len(lines):
            self.line = self.numbers[k]
        if k >= len(lines) or lines[k]["INSTRUCTION"] != kind:
            got = lines[k]["INSTRUCTION"] if k < len(lines) else "the end"
            raise SimrdLogError(f"expected {kind} for {nm} after its CALL, got {got}")
        j = lines[k]
        self.k += 1
        if j.get("NAME") != nm:
            raise SimrdLogError(f"{kind} line names {j.get('NAME')!r}, expected {nm!r}")
        return j

    def cost(self, j: dict) -> float:
        return self.number(j, "TIME", float) if "TIME" in j else 0.0

    def number(self, j: dict, key: str, kind: type, low: float = 0) -> Any:
        """j[key] as an int or a float (the trace writes numbers as strings), finite and
        at least `low`."""
        v = _field(j, key, (str, int, float))
        try:    # ASCII digits only: int() would read "\u0663" (Arabic-Indic 3) as 3
            x = None if isinstance(v, bool) or isinstance(v, str) and not _NUMBER.fullmatch(
                v.strip()) or kind is int and isinstance(v, float) and not v.is_integer() \
                else kind(v)
        except (ValueError, OverflowError):
            x = None
        if x is None or x != x or x in (math.inf, -math.inf):
            raise SimrdLogError(f"{j['INSTRUCTION']} {j.get('NAME', '')}: {key} {v!r} is not "
                             f"{'an integer' if kind is int else 'a finite number'}")
        if x < low:
            raise SimrdLogError(f"{j['INSTRUCTION']} {j.get('NAME', '')}: {key} {v!r} is "
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
        raise SimrdLogError(f"{j['INSTRUCTION']} line without {key!r}: {str(j)[:80]}")
    if not isinstance(j[key], kind):
        raise SimrdLogError(f"{j['INSTRUCTION']}: {key} {j[key]!r} has the wrong type")
    return j[key]


def _name(j: dict, key: str) -> str:
    return _field(j, key, str)


def _names(j: dict, key: str) -> list[str]:
    names = _field(j, key, list)
    bad = [x for x in names if not isinstance(x, str)]
    if bad:
        raise SimrdLogError(f"{j['INSTRUCTION']}: {key} holds {bad[0]!r}, not a tensor name")
    return names

"""Grading assignment 1: liveness with recomputation, in-place hand-overs, the minimum.

Part A: the student writes `fn(graph, schedule, alignment) -> (intervals, minimum)`. The schedule
may run a node more than once (a recomputation, as checkpointing does [Chen 2016]); each
run makes a new copy of the node's outputs, and a run reads the latest copy of each input.
`intervals` maps EVERY tensor name to its copies, `[(start, end, bytes), ...]` in the order
they are made - `end` inclusive [Huawei GE, blog §3], bytes rounded up to `alignment` - and
`minimum` is the theoretical minimum of the planned copies (the CANN GE article's
[Huawei GE]). Without recomputation this is `minigraph.memory.liveness`, lesson 02's
module; with it, no function of the library answers (`liveness` refuses a node twice).

Part B (cases with `inplace`): `fn(graph, schedule, alignment, inplace=True) -> (intervals,
minimum, handovers)`: also which copies write their output over an input copy under the
last-reader rule [NNVM 2016] (lesson 03's clauses, `memory.inplace`, asked of each COPY: the
copy a run reads dies at that run), as `((input, copy), (output, copy))` pairs, and the
minimum counting each chain of handed-over copies as one buffer. The library answers
only the schedules without repeats (`inplace_pairs` on lesson 02's liveness).

The expected answers are the reference solution's (`expected`): run here where it is, else
the digest of the answer it gave on each public case, shipped in `answers.json`, which
says whether an answer is right and cannot be read back (a lookup of the shipped answers
finds nothing to copy). A wrong answer is explained with the rule it breaks: every rule
where the reference is here; where only the digest is, the rules the graph and schedule
decide alone (which tensors, how many copies, where each starts), then that an end or
the minimum is wrong, never the right values; in part B, then the hand-over clauses
the graph and the copies' starts decide (`handover_refusal` without the ends).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import GradingError
from ..graph import Graph, TensorInfo
from ..memory.liveness import PLANNED_KINDS
from ..ops.registry import get_op
from .cases import GraphCase, liveness_cases, private_liveness_cases
from .reference import answer_digest, copies_digest, fingerprint, reference_function, shipped
from .report import CaseResult, GradeReport, finish_report, run_cases
from .runner import DEFAULT_TIME_LIMIT, Garbage, Outcome, ddmin, run_case, scaled

Copies = list[tuple[int, int, int]]
CopyRef = tuple[str, int]                       # (tensor name, copy index from 0)
Handover = tuple[CopyRef, CopyRef]              # (input copy, output copy)
#: part A: (intervals, minimum); part B: (intervals, minimum, sorted hand-overs)
Answer = tuple


def check_liveness(fn: Callable, *, cases: Sequence[GraphCase] | None = None,
                   private: Any = None, seed: int = 0, time_limit: float | None = None,
                   mode: str = "auto", shrink: bool = True, max_timeouts: int = 2,
                   progress: bool = False) -> GradeReport:
    """Grade `fn(graph, schedule, alignment) -> (intervals, minimum)` (part A) and
    `fn(graph, schedule, alignment, inplace=True) -> (intervals, minimum, handovers)`
    (part B, the cases with `inplace`) on the public cases
    (`seed` picks the generated ones), plus private cases (`private`: a directory or a
    seed; default from `MINIGRAPH_PRIVATE_CASES`). One point per case that is entirely
    right; each case runs in a child process with `time_limit` seconds (default
    `DEFAULT_TIME_LIMIT` x `time_scale()`). `fn` may be a `Submission` (a student's file
    in its own process); `progress` prints each case as it is judged. Raises GradingError
    when a case has no expected answer here (`expected`)."""
    if time_limit is None:
        time_limit = scaled(DEFAULT_TIME_LIMIT)
    if cases is None:
        cases = liveness_cases(seed) + private_liveness_cases(private)
    for case in cases:        # every answer known before any run of the student's
        expected(case)
    results, outcomes, status = run_cases(
        cases, lambda case: _run(fn, case, time_limit, mode), _judge, max_timeouts, progress)
    report = GradeReport("A1 liveness", results, status,
                         scoring="1 point per case with every copy's interval, the "
                                 "hand-overs (part B) and the minimum right")
    finish_report(report, cases, results, outcomes,
                  lambda case, out: _reproducer(fn, case, out, time_limit, mode, shrink))
    return report


_expected: dict[tuple, Answer] = {}
_keep_alive: dict[int, Graph] = {}


def expected(case: GraphCase) -> Answer | str:
    """The right answer to a case: the reference solution's (lessons/assignments/
    solutions/a1.py, run in this process), else the DIGEST of the answer it gave (a str,
    `reference.answer_digest`), shipped in answers.json, for a public or generated case of
    seed 0 that is still the case it was (`fingerprint`); cached. GradingError where
    neither is there: the students' repository cannot grade private cases or other
    seeds."""
    key = (id(case.graph), tuple(case.schedule), case.alignment, case.inplace)
    if key in _expected:
        return _expected[key]
    ref = reference_function("a1")
    if ref is not None:
        if case.inplace:
            intervals, minimum, handovers = ref(case.graph, list(case.schedule),
                                                case.alignment, inplace=True)
        else:
            intervals, minimum = ref(case.graph, list(case.schedule), case.alignment)
    else:
        entry = shipped().get("a1", {}).get(case.name) if case.source != "private" else None
        if entry is None or entry["key"] != case_key(case):
            raise GradingError(
                f"A1 case {case.name}: its expected answer comes from the reference solution "
                "(lessons/assignments/solutions/a1.py), which is not here; without it only "
                "the public cases (seed 0) can be graded, from their shipped answers. Grade "
                "private cases and other seeds where the reference solution is.")
        _keep_alive[id(case.graph)] = case.graph
        _expected[key] = entry["digest"]
        return entry["digest"]
    answer = ({n: [tuple(int(x) for x in c) for c in copies]
               for n, copies in intervals.items()}, int(minimum))
    if case.inplace:
        answer += (sorted(((str(x), int(i)), (str(y), int(j)))
                          for (x, i), (y, j) in handovers),)
    _keep_alive[id(case.graph)] = case.graph     # so that no other graph reuses its id
    _expected[key] = answer
    return answer


def case_key(case: GraphCase) -> str:
    """The case's fingerprint (`reference.fingerprint`), part B's marked as such."""
    return fingerprint(case.graph, case.schedule, case.alignment, case.inplace)


def _unpack(answer: Answer) -> tuple[dict[str, Copies], int, list[Handover] | None]:
    return answer[0], answer[1], (answer[2] if len(answer) > 2 else None)


# ---------------------------------------------------------------------------------------

def _run(fn: Callable, case: GraphCase, time_limit: float, mode: str) -> Outcome:
    args = (case.graph, list(case.schedule), case.alignment) + ((True,) if case.inplace else ())
    return run_case(fn, args, time_limit=time_limit, mode=mode)     # part B: inplace=True


def _judge(case: GraphCase, out: Outcome) -> CaseResult:
    ok, msg = judge_liveness(case, out)
    return CaseResult(case.name, case.source, ok, 1.0 if ok else 0.0, msg, out.seconds,
                      printed=out.printed if not ok else "")


def parse_answer(value: Any, inplace: bool = False
                 ) -> tuple[dict[str, Copies] | None, Any, str]:
    """(intervals, minimum, "") from the plain value a solution returned, or a message;
    part B (`inplace`) wants a triple, whose hand-overs `parse_handovers` reads."""
    want = "a triple (intervals, minimum, handovers)" if inplace else \
        "a pair (intervals, minimum)"
    if isinstance(value, dict) and {"intervals"} <= set(value) and "__type__" in value:
        return None, None, (f"you returned a {value['__type__']}; return {want} instead")
    if not isinstance(value, (list, tuple)) or len(value) != (3 if inplace else 2):
        extra = ("; with inplace=True the answer has a third part, the hand-overs"
                 if inplace and isinstance(value, (list, tuple)) and len(value) == 2 else "")
        return None, None, f"expected {want}, got {_describe(value)}{extra}"
    raw, minimum = value[0], value[1]
    if not isinstance(raw, dict):
        return None, None, ("intervals must be a dict {tensor name: [(start, end, bytes), "
                            f"...]}}, got {_describe(raw)}")
    intervals = {}
    for name, v in raw.items():
        if not isinstance(v, (list, tuple)):
            return None, None, (f"the intervals of {name!r} must be a list of (start, end, "
                                f"bytes), one per copy, got {_describe(v)}")
        if v and all(isinstance(x, int) for x in v):
            return None, None, (f"the intervals of {name!r} must be a list of (start, end, "
                                f"bytes), one per copy; you gave one {tuple(v)}: write "
                                f"[{tuple(v)}]")
        copies = []
        for c in v:
            if isinstance(c, dict) and {"start", "end", "bytes"} <= set(c):
                c = (c["start"], c["end"], c["bytes"])
            if not isinstance(c, (list, tuple)) or len(c) != 3:
                return None, None, (f"a copy of {name!r} must be (start, end, bytes), got "
                                    f"{_describe(c)}")
            for label, x in zip(("start", "end", "bytes"), c):
                if not isinstance(x, int) or isinstance(x, bool):
                    return None, None, (f"{label} of {name!r} is {x!r} ({_describe(x)}); "
                                        "steps and bytes are integers")
            copies.append(tuple(c))
        intervals[name if not isinstance(name, Garbage) else repr(name)] = copies
    return intervals, minimum, ""


def parse_handovers(raw: Any) -> tuple[list[Handover] | None, str]:
    """The hand-overs a part-B answer gave, sorted, or a message: a list of
    ((input, copy), (output, copy)), each copy named by its tensor and its index (from
    0) among that tensor's copies; none twice."""
    shape = "a list of ((input, copy), (output, copy)) pairs, e.g. [(('relu_0', 0), " \
            "('tanh_0', 0))]"
    if not isinstance(raw, (list, tuple, set, frozenset)):
        return None, f"the hand-overs must be {shape}, got {_describe(raw)}"
    out = []
    for h in raw:
        ok = (isinstance(h, (list, tuple)) and len(h) == 2
              and all(isinstance(c, (list, tuple)) and len(c) == 2 and isinstance(c[0], str)
                      and isinstance(c[1], int) and not isinstance(c[1], bool) for c in h))
        if not ok:
            return None, f"a hand-over must be ((input, copy), (output, copy)), got {h!r}"
        out.append(((h[0][0], h[0][1]), (h[1][0], h[1][1])))
    twice = [h for k, h in enumerate(sorted(out)) if k and sorted(out)[k - 1] == h]
    if twice:
        return None, f"the hand-over {twice[0]} is listed twice"
    return sorted(out), ""


def _describe(x: Any) -> str:
    if isinstance(x, Garbage):
        return f"a {x.type_name} ({x.text})"
    if isinstance(x, (list, tuple)):
        return f"a {type(x).__name__} of length {len(x)}"
    return f"a {type(x).__name__}" if x is not None else "None"


def judge_liveness(case: GraphCase, out: Outcome) -> tuple[bool, str]:
    """Whether the answer is right, and if not, the first rule it breaks, explained."""
    if not out.ok:
        msg = f"your function {out.describe()}"
        if out.traceback:
            msg += "\n" + out.traceback
        return False, msg
    answer = expected(case)
    intervals, minimum, problem = parse_answer(out.value, case.inplace)
    if problem:
        return False, problem
    handovers = None
    if case.inplace:
        handovers, problem = parse_handovers(out.value[2])
        if problem:
            return False, problem
    if isinstance(answer, str):
        return judge_by_digest(case, intervals, minimum, answer, handovers)
    want, want_min, want_hand = _unpack(answer)
    missing = [n for n in want if n not in intervals]
    if missing:
        t = case.graph.tensors[missing[0]]
        return False, (f"no interval for tensor {missing[0]!r} ({t.kind}); every tensor of "
                       f"the graph needs one ({len(missing)} missing)")
    extra = [n for n in intervals if n not in want]
    if extra:
        return False, f"{extra[0]!r} is not a tensor of this graph"
    for name in sorted(want, key=lambda n: (want[n][0][0] if want[n] else 0, n)):
        if intervals[name] != want[name]:
            return False, explain_copies(case, name, intervals[name], want[name])
    if handovers is not None and handovers != want_hand:
        return False, explain_handovers(case, handovers, want, want_hand)
    if not isinstance(minimum, int) or isinstance(minimum, bool):
        return False, (f"the minimum must be an integer number of bytes, got "
                       f"{_describe(minimum)}")
    if minimum != want_min:
        return False, explain_minimum(case, minimum)
    return True, ""


def planned(graph: Graph, name: str) -> bool:
    """Whether the arena holds the tensor: an activation or gradient, not a graph output."""
    return graph.tensors[name].kind in PLANNED_KINDS and name not in graph.outputs


def handover_refusal(case: GraphCase, h: Handover,
                     ends: dict[str, Copies] | None = None) -> str:
    """The first clause the hand-over ((x, i), (y, j)) breaks ("" if none): those the graph
    and the copies' starts decide - y's copy j is made by a run of its producer that reads
    x's copy i (the latest made before it), the op declares (y, x) in-place capable, both
    tensors are planned, one dtype and element count, x read through one operand - and,
    given the copies `ends` (the reference's), that copy i of x dies at that run."""
    (x, i), (y, j) = h
    g = case.graph
    for t in (x, y):
        if t not in g.tensors:
            return f"{t!r} is not a tensor of this graph"
    tx, ty = g.tensors[x], g.tensors[y]
    if ty.producer is None:
        return f"{y!r} is a {ty.kind}: no node makes it, so it takes no bytes"
    node = g.node(ty.producer)
    runs = copy_starts(case, y)
    if not 0 <= j < len(runs):
        return (f"{y!r} has {_plural(len(runs), 'copy')} (copies 0 to {len(runs) - 1}: one "
                f"per run of {node.name}); there is no copy {j}")
    step = runs[j]
    if x not in node.inputs:
        return f"{x!r} is not an input of {node.name} ({node.op}), which makes {y!r}"
    out_k = node.outputs.index(y)
    if not any(o == out_k and node.inputs[k] == x for o, k in get_op(node.op).inplace
               if k < len(node.inputs)):
        return (f"{node.op} ({node.name}) does not declare that its output {out_k} ({y}) "
                f"may overwrite its input {x!r}: its kernel may read an element after "
                "writing one (get_op(op).inplace lists the pairs it declares)")
    for t in (tx, ty):
        if not planned(g, t.name):
            what = "a graph output" if t.name in g.outputs else f"a {t.kind}"
            return (f"{t.name!r} is {what}, which keeps its own storage: only planned "
                    "tensors (activations and gradients that are not graph outputs) hand "
                    "over")
    if tx.dtype != ty.dtype or int(np.prod(tx.shape)) != int(np.prod(ty.shape)):
        return (f"{x!r} ({tx.dtype}{list(tx.shape)}) and {y!r} ({ty.dtype}{list(ty.shape)}) "
                "differ in dtype or element count: the output must fit the input's bytes "
                "exactly")
    if node.inputs.count(x) != 1:
        return (f"{node.name} reads {x!r} through {node.inputs.count(x)} operands: it would "
                "read the operand after writing over it")
    made = [k for k, s in enumerate(copy_starts(case, x)) if s < step]
    if not made or i != made[-1]:
        return (f"the run of {node.name} at step {step} makes copy {j} of {y!r} and reads copy "
                f"{made[-1] if made else '?'} of {x!r} (the latest made before it), not copy "
                f"{i}")
    if ends is not None and ends[x][i][1] != step:
        e = ends[x][i][1]
        return (f"copy {i} of {x!r} is read after step {step}: its last reader, "
                f"{case.schedule[e]}, runs at step {e} - writing over it at step {step} "
                "would destroy a value still to be read")
    return ""


def explain_handovers(case: GraphCase, got: list[Handover], want: dict[str, Copies],
                      want_hand: list[Handover]) -> str:
    """Why the hand-overs are wrong: the first one given that breaks a clause, or that
    two take one copy, or the first one the rules allow that is missing."""
    lines = [f"hand-overs: you gave {len(got)}, the rules give {len(want_hand)}"]
    gives: dict[CopyRef, Handover] = {}
    takes: dict[CopyRef, Handover] = {}
    for h in got:
        why = handover_refusal(case, h, want)
        if why:
            lines.append(f"- {h} breaks a rule: {why}")
            return "\n".join(lines)
        for side, seen in ((h[0], gives), (h[1], takes)):
            if side in seen:
                lines.append(f"- {seen[side]} and {h} both use copy {side[1]} of "
                             f"{side[0]!r}: a copy gives its bytes to at most one output "
                             "copy, and takes at most one input copy's")
                return "\n".join(lines)
            seen[side] = h
    extra = [h for h in got if h not in want_hand]
    if extra:
        h = extra[0]
        other = next((w for w in want_hand if w[1] == h[1] or w[0] == h[0]), None)
        lines.append(f"- {h} keeps every clause, but the rules give "
                     f"{other}: where a run may hand over more than one pair, it takes "
                     "them in the order its op declares them (get_op(op).inplace), and "
                     "each copy gives and takes at most once" if other else
                     f"- {h}: not a hand-over the rules give")
        return "\n".join(lines)
    h = next(w for w in want_hand if w not in got)
    (x, i), (y, j) = h
    step = copy_starts(case, y)[j]
    lines.append(f"- missing {h}: the run of {case.schedule[step]} at step {step} makes copy "
                 f"{j} of {y!r}, its op declares that it may write over {x!r}, both are "
                 f"planned with the same dtype and size, and copy {i} of {x!r} dies at "
                 "that very run (its last reader): its bytes are free for the output")
    return "\n".join(lines)


def copy_starts(case: GraphCase, name: str) -> list[int]:
    """Where each copy of tensor `name` starts, from the graph and the schedule alone: a
    leaf (input, parameter, constant) has one copy from step 0; otherwise each run of its
    producer makes one, at that run's step."""
    t = case.graph.tensors[name]
    if t.producer is None:
        return [0]
    return [k for k, n in enumerate(case.schedule) if n == t.producer]


def judge_by_digest(case: GraphCase, intervals: dict[str, Copies], minimum: Any,
                    digest: str, handovers: list[Handover] | None = None
                    ) -> tuple[bool, str]:
    """Judge an answer against the shipped digest of the right one: right when the
    digests agree; when not, the first rule the graph and schedule decide alone that it
    breaks (the tensors, the number of copies, their starts), else that an end, a byte
    count or the minimum is wrong - never the right values, which are not here."""
    g = case.graph
    missing = [n for n in g.tensors if n not in intervals]
    if missing:
        return False, (f"no interval for tensor {missing[0]!r} ({g.tensors[missing[0]].kind}); "
                       f"every tensor of the graph needs one ({len(missing)} missing)")
    extra = [n for n in intervals if n not in g.tensors]
    if extra:
        return False, f"{extra[0]!r} is not a tensor of this graph"
    if not isinstance(minimum, int) or isinstance(minimum, bool):
        return False, (f"the minimum must be an integer number of bytes, got "
                       f"{_describe(minimum)}")
    key = case_key(case)
    if answer_digest(key, intervals, minimum, handovers) == digest:
        return True, ""
    entry = shipped()["a1"][case.name]
    if handovers is not None and copies_digest(key, intervals) == entry.get("copies"):
        for h in handovers:       # the copies are right: the clauses they do not decide
            why = handover_refusal(case, h)
            if why:
                return False, f"hand-over {h} breaks a rule: {why}"
        return False, ("every copy is right (it matches the digest of the reference "
                       "solution's copies), and each hand-over you give keeps the clauses "
                       "the graph and the copies' starts decide; but the hand-overs or the "
                       "minimum are not the reference solution's. Check that each input "
                       "copy dies at the run that takes its bytes, that you missed none (a "
                       "run hands over in the order its op declares), and the minimum of "
                       "the chains of copies (graded where the reference solution is, each "
                       "is explained)")
    for name in g.tensors:
        t, starts, got = g.tensors[name], copy_starts(case, name), intervals[name]
        if len(got) != len(starts):
            rule = (f"a {t.kind} is a leaf with its own storage: one copy"
                    if t.producer is None else
                    f"node {t.producer} runs {_plural(len(starts), 'time')} (steps "
                    f"{', '.join(map(str, starts))}) and each run makes a new copy: "
                    f"{_plural(len(starts), 'copy')}, in the order they are made")
            return False, f"tensor {name!r}: you gave {_plural(len(got), 'copy')}; {rule}"
        for j, (c, s) in enumerate(zip(got, starts)):
            if c[0] != s:
                return False, (f"tensor {name!r}, copy {j + 1}: you said it starts at step "
                               f"{c[0]}; it is made at step {s}")
    return False, ("every tensor has the right number of copies, each starting where it is "
                   "made, but an end, a byte count"
                   + (", the hand-overs" if handovers is not None else "") +
                   " or the minimum is not the reference solution's. "
                   "The public answers ship only as a digest, so this repository cannot "
                   "say which: check each copy's last read, the alignment, and the minimum "
                   "(graded where the reference solution is, each is explained)")


def _plural(n: int, word: str) -> str:
    if n == 1:
        return f"{n} {word}"
    return f"{n} {word[:-1]}ies" if word.endswith("y") else f"{n} {word}s"


def explain_copies(case: GraphCase, name: str, got: Copies, want: Copies) -> str:
    """Why the copies of one tensor are wrong: the first rule they break, with the case's
    own steps (from the expected answer and the schedule)."""
    g, sched = case.graph, case.schedule
    t = g.tensors[name]
    last = max(len(sched) - 1, 0)
    lines = [f"tensor {name!r} ({t.kind}, {t.spec()} {t.dtype}): you said {got}, the rules "
             f"give {want}"]
    runs = [k for k, n in enumerate(sched) if n == t.producer]
    if len(got) != len(want):
        if t.producer is None:
            lines.append(f"- a {t.kind} is a leaf with its own storage: one copy, alive for "
                         f"the whole run, steps [0, {last}]")
        else:
            lines.append(f"- node {t.producer} runs {_plural(len(runs), 'time')} (steps "
                         f"{', '.join(map(str, runs))}) and each run makes a new copy: "
                         f"{_plural(len(runs), 'copy')}, in the order they are made")
        return "\n".join(lines)
    j = next(k for k, (a, b) in enumerate(zip(got, want)) if a != b)
    mine, (start, end, nbytes) = got[j], want[j]
    if len(want) > 1:
        lines.append(f"- copy {j + 1} of {len(want)}: you said {mine}, the rules give "
                     f"{want[j]}")
    if (mine[0], mine[1]) != (start, end):
        nxt = want[j + 1][0] if j + 1 < len(want) else None
        if t.producer is None:
            lines.append(f"- a {t.kind} is a leaf with its own storage: it is alive for the "
                         f"whole run, steps [0, {last}]")
        else:
            lines.append(f"- start: the run of {t.producer} at step {start} makes it")
            if name in g.outputs and nxt is None:
                lines.append(f"- end: a graph output: its last copy stays alive to the last "
                             f"step, {last}")
            elif end > start:
                again = sched.index(sched[end]) < end
                lines.append(f"- end: the last run that reads this copy is {sched[end]} at "
                             f"step {end}" + (" - a recomputation: a node that runs again "
                                              "reads its inputs again, which keeps their "
                                              "latest copies alive" if again else ""))
            else:
                lines.append("- end: no run reads this copy, so it dies at the step that "
                             "makes it")
            if nxt is not None and mine[1] >= nxt:
                lines.append(f"- a run reads the LATEST copy made before it: from step {nxt} "
                             f"on, readers read copy {j + 2}, not this one")
            elif mine[1] == end - 1:
                lines.append("- off by one: the end is INCLUSIVE - the copy is still alive "
                             "while its last reader runs")
            elif mine[1] == end + 1:
                lines.append("- off by one: the end is the step of the last reader itself, "
                             "not the step after it")
    if mine[2] != nbytes:
        if t.alias_of is not None:
            lines.append(f"- bytes: it is a parameter update written over {t.alias_of} in "
                         "place, so it has no bytes of its own (0)")
        else:
            raw = t.nbytes
            lines.append(f"- bytes: {int(np.prod(t.shape, dtype=np.int64))} elements x "
                         f"{np.dtype(t.dtype).itemsize} B = {raw} B, rounded up to a "
                         f"multiple of the alignment {case.alignment}: {nbytes} B")
            if mine[2] == raw and raw != nbytes:
                lines.append("- you did not round up to the alignment")
    return "\n".join(lines)


def chains(want: dict[str, Copies], handovers: list[Handover] | None,
           names: Sequence[str]) -> dict[CopyRef, list]:
    """The buffers of the planned copies `names`: each chain of handed-over copies is one,
    from its first copy's birth to its last copy's death; first copy -> [start, end,
    bytes, members]."""
    order = sorted(handovers or [], key=lambda h: want[h[1][0]][h[1][1]][0])
    head: dict[CopyRef, CopyRef] = {}
    for x, y in order:
        head[y] = head.get(x, x)
    span: dict[CopyRef, list] = {}
    for n in names:
        for k, (s, e, b) in enumerate(want[n]):
            h = head.get((n, k), (n, k))
            sp = span.setdefault(h, [s, e, b, []])
            sp[0], sp[1], sp[2] = min(sp[0], s), max(sp[1], e), max(sp[2], b)
            sp[3].append((n, k))
    return span


def explain_minimum(case: GraphCase, got: int) -> str:
    g = case.graph
    want, want_min, want_hand = _unpack(expected(case))
    names = [n for n in g.tensors if planned(g, n)]
    buffers = chains(want, want_hand, names)
    live = [0] * (len(case.schedule) + 1)
    for s, e, b, _ in buffers.values():
        live[s] += b
        live[e + 1] -= b
    total, per_step = 0, []
    for d in live[:-1]:
        total += d
        per_step.append(total)
    step = per_step.index(max(per_step)) if per_step else 0
    alive = [(m, b) for s, e, b, m in buffers.values() if s <= step <= e and b]

    def label(members: list[CopyRef]) -> str:
        return " <- ".join(f"{n}{f' (copy {k + 1})' if len(want[n]) > 1 else ''}"
                           for n, k in reversed(members))
    listed = ", ".join(f"{label(m)} ({b} B)" for m, b in alive[:8])
    chained = (" A chain of hand-overs is one buffer: its copies' bytes count once, from "
               "its first copy's birth to its last copy's death." if want_hand else "")
    return (f"theoretical minimum: you said {got}, the rules give {want_min} B - the largest "
            f"sum of planned bytes alive at one step (step {step}: {listed}"
            f"{', ...' if len(alive) > 8 else ''}). Planned tensors are activations and "
            "gradients that are not graph outputs, and every copy of one counts while it "
            "lives; inputs, parameters, constants and outputs keep their own storage and do "
            "not count." + chained)


# ---------------------------------------------------------------------------------------
# Shrinking a failing case to a small reproducer
# ---------------------------------------------------------------------------------------

def reduce_case(case: GraphCase, keep: Sequence[str]) -> GraphCase:
    """The case with only the nodes in `keep`: tensors whose producer is dropped become
    graph inputs; outputs whose producer is dropped stop being outputs."""
    g = case.graph
    keep = set(keep)
    nodes = [replace(n, deps=tuple(d for d in n.deps if d in keep))
             for n in g.nodes if n.name in keep]
    produced = {o for n in nodes for o in n.outputs}
    used = {i for n in nodes for i in n.inputs} | produced
    tensors = {}
    for name in g.tensors:
        if name not in used:
            continue
        t = g.tensors[name]
        if t.producer is not None and t.producer not in keep:
            t = TensorInfo(name, t.shape, t.dtype, "input")
        tensors[name] = t
    outputs = [o for o in g.outputs if o in produced]
    g2 = Graph.from_nodes(nodes, tensors, outputs, g.name)
    sched = tuple(n for n in case.schedule if n in keep)
    return GraphCase(case.name, g2, sched, case.alignment, case.source,
                     inplace=case.inplace)


def _category(out: Outcome) -> str:
    return f"error:{out.error_type}" if out.status == "error" else out.status


def _reproducer(fn: Callable, case: GraphCase, out: Outcome, time_limit: float, mode: str,
                shrink: bool) -> str:
    """The failing case shrunk to a few nodes, as code - where the reference solution is
    here to answer the smaller graphs - else the public case by its name."""
    if case.source == "private":
        return "(a private case: its graph is not shown)"
    name = getattr(fn, "__name__", "fn")
    if reference_function("a1") is None:
        return named_case_code(case, name, out)
    small = case
    if shrink and out.status in ("ok", "error"):
        want = _category(out)

        def fails(keep: list[str]) -> bool:
            if not keep:
                return False
            c = reduce_case(case, keep)
            o = _run(fn, c, min(time_limit, scaled(5.0)), mode)
            return _category(o) == want and not judge_liveness(c, o)[0]

        keep = ddmin([n.name for n in case.graph.nodes], fails)
        small = reduce_case(case, keep)
    code = graph_case_code(small, name)
    if small is not case:
        o = _run(fn, small, time_limit, mode)
        ok, msg = judge_liveness(small, o)
        if not ok:
            code += "\n# on this graph: " + "\n#   ".join(msg.splitlines()[:6])
    return code


def graph_case_code(case: GraphCase, fn_name: str = "my_liveness") -> str:
    """Python that rebuilds the case and calls the function, with the expected answer."""
    g = case.graph
    want, want_min, want_hand = _unpack(expected(case))
    lines = ["from minigraph.graph import Graph, Node, TensorInfo", "nodes = ["]
    lines += [f"    {n!r}," for n in g.nodes]
    lines += ["]", "tensors = {t.name: t for t in ["]
    lines += [f"    {replace(t, value=None, init=None)!r}," for t in g.tensors.values()]
    lines += ["]}", f"graph = Graph.from_nodes(nodes, tensors, outputs={list(g.outputs)!r})",
              f"schedule = {list(case.schedule)!r}",
              (f"intervals, minimum, handovers = {fn_name}(graph, schedule, "
               f"alignment={case.alignment}, inplace=True)" if case.inplace else
               f"intervals, minimum = {fn_name}(graph, schedule, alignment={case.alignment})"),
              "# expected copies [(start, end, bytes), ...]:"]
    for n in sorted(want, key=lambda n: (want[n][0][0] if want[n] else 0, n)):
        lines.append(f"#   {n}: {want[n]}")
    if want_hand is not None:
        lines.append(f"# expected hand-overs: {want_hand}")
    lines.append(f"# expected minimum: {want_min}")
    return "\n".join(lines)


def named_case_code(case: GraphCase, fn_name: str, out: Outcome) -> str:
    """Python that fetches a public case by its name and calls the function, with what
    the rules give for the first tensor it got wrong."""
    lines = ["from minigraph.grading.cases import liveness_case",
             f"case = liveness_case({case.name!r})",
             (f"intervals, minimum, handovers = {fn_name}(case.graph, list(case.schedule), "
              "case.alignment, inplace=True)" if case.inplace else
              f"intervals, minimum = {fn_name}(case.graph, list(case.schedule), "
              "case.alignment)")]
    answer = expected(case)
    if isinstance(answer, str):   # only its digest is here: nothing to show
        return "\n".join(lines)
    want, want_min, want_hand = _unpack(answer)
    intervals, _, problem = (parse_answer(out.value, case.inplace) if out.ok
                             else (None, None, ""))
    wrong = [n for n in want if intervals is not None and intervals.get(n) != want[n]]
    if wrong:
        lines.append(f"# expected intervals[{wrong[0]!r}]: {want[wrong[0]]}")
    if want_hand is not None:
        lines.append(f"# expected hand-overs: {want_hand}")
    lines.append(f"# expected minimum: {want_min}")
    return "\n".join(lines)

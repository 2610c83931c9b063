"""Grading assignment 1: liveness with recomputation, and the theoretical minimum.

The student writes `fn(graph, schedule, alignment) -> (intervals, minimum)`. The schedule
may run a node more than once (a recomputation, as checkpointing does [Chen 2016]); each
run makes a new copy of the node's outputs, and a run reads the latest copy of each input.
`intervals` maps EVERY tensor name to its copies, `[(start, end, bytes), ...]` in the order
they are made - `end` inclusive [Huawei GE, blog §3], bytes rounded up to `alignment` - and
`minimum` is the theoretical minimum of the planned copies (the CANN GE article's
[Huawei GE]). Without recomputation this is `minigraph.memory.liveness`, lesson 02's
module; with it, no function of the library answers (`liveness` refuses a node twice).

The expected answers are the reference solution's (`expected`): run here where it is, else
the digest of the answer it gave on each public case, shipped in `answers.json`, which
says whether an answer is right and cannot be read back (a lookup of the shipped answers
finds nothing to copy). A wrong answer is explained with the rule it breaks: every rule
where the reference is here; where only the digest is, the rules the graph and schedule
decide alone (which tensors, how many copies, where each starts), then that an end or
the minimum is wrong, never the right values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import GradingError
from ..graph import Graph, TensorInfo
from ..memory.liveness import PLANNED_KINDS
from .cases import GraphCase, liveness_cases, private_liveness_cases
from .reference import answer_digest, fingerprint, reference_function, shipped
from .report import CaseResult, GradeReport, finish_report, run_cases
from .runner import DEFAULT_TIME_LIMIT, Garbage, Outcome, ddmin, run_case, scaled

Copies = list[tuple[int, int, int]]
Answer = tuple[dict[str, Copies], int]


def check_liveness(fn: Callable, *, cases: Sequence[GraphCase] | None = None,
                   private: Any = None, seed: int = 0, time_limit: float | None = None,
                   mode: str = "auto", shrink: bool = True, max_timeouts: int = 2,
                   progress: bool = False) -> GradeReport:
    """Grade `fn(graph, schedule, alignment) -> (intervals, minimum)` on the public cases
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
                         scoring="1 point per case with every copy's interval and the "
                                 "minimum right")
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
    key = (id(case.graph), tuple(case.schedule), case.alignment)
    if key in _expected:
        return _expected[key]
    ref = reference_function("a1")
    if ref is not None:
        intervals, minimum = ref(case.graph, list(case.schedule), case.alignment)
    else:
        entry = shipped().get("a1", {}).get(case.name) if case.source != "private" else None
        if entry is None or entry["key"] != fingerprint(case.graph, case.schedule,
                                                        case.alignment):
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
    _keep_alive[id(case.graph)] = case.graph     # so that no other graph reuses its id
    _expected[key] = answer
    return answer


# ---------------------------------------------------------------------------------------

def _run(fn: Callable, case: GraphCase, time_limit: float, mode: str) -> Outcome:
    return run_case(fn, (case.graph, list(case.schedule), case.alignment),
                    time_limit=time_limit, mode=mode)


def _judge(case: GraphCase, out: Outcome) -> CaseResult:
    ok, msg = judge_liveness(case, out)
    return CaseResult(case.name, case.source, ok, 1.0 if ok else 0.0, msg, out.seconds,
                      printed=out.printed if not ok else "")


def parse_answer(value: Any) -> tuple[dict[str, Copies] | None, Any, str]:
    """(intervals, minimum, "") from the plain value a solution returned, or a message."""
    if isinstance(value, dict) and {"intervals"} <= set(value) and "__type__" in value:
        return None, None, (f"you returned a {value['__type__']}; return a pair "
                            "(intervals, minimum) instead")
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return None, None, ("expected a pair (intervals, minimum), got "
                            f"{_describe(value)}")
    raw, minimum = value
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
    intervals, minimum, problem = parse_answer(out.value)
    if problem:
        return False, problem
    if isinstance(answer, str):
        return judge_by_digest(case, intervals, minimum, answer)
    want, want_min = answer
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
    if not isinstance(minimum, int) or isinstance(minimum, bool):
        return False, (f"the minimum must be an integer number of bytes, got "
                       f"{_describe(minimum)}")
    if minimum != want_min:
        return False, explain_minimum(case, minimum)
    return True, ""


def copy_starts(case: GraphCase, name: str) -> list[int]:
    """Where each copy of tensor `name` starts, from the graph and the schedule alone: a
    leaf (input, parameter, constant) has one copy from step 0; otherwise each run of its
    producer makes one, at that run's step."""
    t = case.graph.tensors[name]
    if t.producer is None:
        return [0]
    return [k for k, n in enumerate(case.schedule) if n == t.producer]


def judge_by_digest(case: GraphCase, intervals: dict[str, Copies], minimum: Any,
                    digest: str) -> tuple[bool, str]:
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
    key = fingerprint(case.graph, case.schedule, case.alignment)
    if answer_digest(key, intervals, minimum) == digest:
        return True, ""
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
    return False, ("every tensor has the right copies, each starting where it is made, but "
                   "an end, a byte count or the minimum is not the reference solution's. "
                   "The public answers ship only as a digest, so this repository cannot "
                   "say which: check each copy's last read, the alignment, and the minimum "
                   "(graded where the reference solution is, each is explained)")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "ies" if word.endswith("y") else "s")


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


def explain_minimum(case: GraphCase, got: int) -> str:
    g = case.graph
    want, want_min = expected(case)
    planned = [n for n, t in g.tensors.items()
               if t.kind in PLANNED_KINDS and n not in g.outputs]
    live = [0] * (len(case.schedule) + 1)
    for n in planned:
        for s, e, b in want[n]:
            live[s] += b
            live[e + 1] -= b
    total, per_step = 0, []
    for d in live[:-1]:
        total += d
        per_step.append(total)
    step = per_step.index(max(per_step)) if per_step else 0
    alive = [(n, k, b) for n in planned for k, (s, e, b) in enumerate(want[n])
             if s <= step <= e and b]
    names = ", ".join(f"{n}{f' (copy {k + 1})' if len(want[n]) > 1 else ''} ({b} B)"
                      for n, k, b in alive[:8])
    return (f"theoretical minimum: you said {got}, the rules give {want_min} B - the largest "
            f"sum of planned bytes alive at one step (step {step}: {names}"
            f"{', ...' if len(alive) > 8 else ''}). Planned tensors are activations and "
            "gradients that are not graph outputs, and every copy of one counts while it "
            "lives; inputs, parameters, constants and outputs keep their own storage and do "
            "not count.")


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
    return GraphCase(case.name, g2, sched, case.alignment, case.source)


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
    want, want_min = expected(case)
    lines = ["from minigraph.graph import Graph, Node, TensorInfo", "nodes = ["]
    lines += [f"    {n!r}," for n in g.nodes]
    lines += ["]", "tensors = {t.name: t for t in ["]
    lines += [f"    {replace(t, value=None, init=None)!r}," for t in g.tensors.values()]
    lines += ["]}", f"graph = Graph.from_nodes(nodes, tensors, outputs={list(g.outputs)!r})",
              f"schedule = {list(case.schedule)!r}",
              f"intervals, minimum = {fn_name}(graph, schedule, alignment={case.alignment})",
              "# expected copies [(start, end, bytes), ...]:"]
    for n in sorted(want, key=lambda n: (want[n][0][0] if want[n] else 0, n)):
        lines.append(f"#   {n}: {want[n]}")
    lines.append(f"# expected minimum: {want_min}")
    return "\n".join(lines)


def named_case_code(case: GraphCase, fn_name: str, out: Outcome) -> str:
    """Python that fetches a public case by its name and calls the function, with what
    the rules give for the first tensor it got wrong."""
    lines = ["from minigraph.grading.cases import liveness_case",
             f"case = liveness_case({case.name!r})",
             f"intervals, minimum = {fn_name}(case.graph, list(case.schedule), "
             "case.alignment)"]
    answer = expected(case)
    if isinstance(answer, str):   # only its digest is here: nothing to show
        return "\n".join(lines)
    want, want_min = answer
    intervals, _, problem = parse_answer(out.value) if out.ok else (None, None, "")
    wrong = [n for n in want if intervals is not None and intervals.get(n) != want[n]]
    if wrong:
        lines.append(f"# expected intervals[{wrong[0]!r}]: {want[wrong[0]]}")
    lines.append(f"# expected minimum: {want_min}")
    return "\n".join(lines)

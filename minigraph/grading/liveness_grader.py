"""Grading assignment 1: liveness intervals and the theoretical minimum.

The student writes `fn(graph, schedule, alignment) -> (intervals, minimum)` where
`intervals` maps EVERY tensor name to `(start, end, bytes)` - `end` inclusive, bytes
rounded up to `alignment` - and `minimum` is the theoretical minimum of the planned
tensors. The reference is `minigraph.memory.liveness` ([Huawei GE, blog §3]; the CANN GE article's
theoretical minimum [Huawei GE]). A wrong answer is explained with the rule it breaks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..graph import Graph, TensorInfo
from ..memory.liveness import Liveness, liveness
from .cases import GraphCase, liveness_cases, private_liveness_cases
from .report import CaseResult, GradeReport, finish_report, run_cases
from .runner import DEFAULT_TIME_LIMIT, Garbage, Outcome, ddmin, run_case, scaled


def check_liveness(fn: Callable, *, cases: Sequence[GraphCase] | None = None,
                   private: Any = None, seed: int = 0, time_limit: float | None = None,
                   mode: str = "auto", shrink: bool = True, max_timeouts: int = 2,
                   progress: bool = False) -> GradeReport:
    """Grade `fn(graph, schedule, alignment) -> (intervals, minimum)` on the public cases
    (`seed` picks the generated ones), plus private cases (`private`: a directory or a
    seed; default from `MINIGRAPH_PRIVATE_CASES`). One point per case that is entirely
    right; each case runs in a child process with `time_limit` seconds (default
    `DEFAULT_TIME_LIMIT` x `time_scale()`). `fn` may be a `Submission` (a student's file
    in its own process); `progress` prints each case as it is judged."""
    if time_limit is None:
        time_limit = scaled(DEFAULT_TIME_LIMIT)
    if cases is None:
        cases = liveness_cases(seed) + private_liveness_cases(private)
    results, outcomes, status = run_cases(
        cases, lambda case: _run(fn, case, time_limit, mode), _judge, max_timeouts, progress)
    report = GradeReport("A1 liveness", results, status,
                         scoring="1 point per case with every interval and the minimum right")
    finish_report(report, cases, results, outcomes,
                  lambda case, out: _reproducer(fn, case, out, time_limit, mode, shrink))
    return report


# ---------------------------------------------------------------------------------------

def _run(fn: Callable, case: GraphCase, time_limit: float, mode: str) -> Outcome:
    return run_case(fn, (case.graph, list(case.schedule), case.alignment),
                    time_limit=time_limit, mode=mode)


def _judge(case: GraphCase, out: Outcome) -> CaseResult:
    ok, msg = judge_liveness(case, out)
    return CaseResult(case.name, case.source, ok, 1.0 if ok else 0.0, msg, out.seconds,
                      printed=out.printed if not ok else "")


def parse_answer(value: Any) -> tuple[dict[str, tuple[int, int, int]] | None, Any, str]:
    """(intervals, minimum, "") from the plain value a solution returned, or a message."""
    if isinstance(value, dict) and {"intervals"} <= set(value) and "__type__" in value:
        return None, None, (f"you returned a {value['__type__']}; return a pair "
                            "(intervals, minimum) instead")
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return None, None, ("expected a pair (intervals, minimum), got "
                            f"{_describe(value)}")
    raw, minimum = value
    if not isinstance(raw, dict):
        return None, None, ("intervals must be a dict {tensor name: (start, end, bytes)}, "
                            f"got {_describe(raw)}")
    intervals = {}
    for name, v in raw.items():
        if isinstance(v, dict) and {"start", "end", "bytes"} <= set(v):
            v = (v["start"], v["end"], v["bytes"])
        if not isinstance(v, (list, tuple)) or len(v) != 3:
            return None, None, (f"the interval of {name!r} must be (start, end, bytes), got "
                                f"{_describe(v)}")
        for label, x in zip(("start", "end", "bytes"), v):
            if not isinstance(x, int) or isinstance(x, bool):
                return None, None, (f"{label} of {name!r} is {x!r} ({_describe(x)}); "
                                    "steps and bytes are integers")
        intervals[name if not isinstance(name, Garbage) else repr(name)] = tuple(v)
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
    ref = liveness(case.graph, case.schedule, case.alignment)
    intervals, minimum, problem = parse_answer(out.value)
    if problem:
        return False, problem
    want = ref.intervals
    missing = [n for n in want if n not in intervals]
    if missing:
        t = case.graph.tensors[missing[0]]
        return False, (f"no interval for tensor {missing[0]!r} ({t.kind}); every tensor of "
                       f"the graph needs one ({len(missing)} missing)")
    extra = [n for n in intervals if n not in want]
    if extra:
        return False, f"{extra[0]!r} is not a tensor of this graph"
    for name in sorted(want, key=lambda n: (want[n].start, n)):
        iv = want[name]
        got = intervals[name]
        if got != (iv.start, iv.end, iv.bytes):
            return False, explain_interval(case, ref, name, got)
    ref_min = ref.theoretical_minimum()
    if not isinstance(minimum, int) or isinstance(minimum, bool):
        return False, (f"the minimum must be an integer number of bytes, got "
                       f"{_describe(minimum)}")
    if minimum != ref_min:
        return False, explain_minimum(case, ref, minimum)
    return True, ""


def explain_interval(case: GraphCase, ref: Liveness, name: str,
                     got: tuple[int, int, int]) -> str:
    g = case.graph
    t = g.tensors[name]
    iv = ref.intervals[name]
    pos = {n: k for k, n in enumerate(ref.schedule)}
    last = max(ref.steps - 1, 0)
    lines = [f"tensor {name!r} ({t.kind}, {t.spec()} {t.dtype}): you said "
             f"(start, end, bytes) = {got}, the rule gives {(iv.start, iv.end, iv.bytes)}"]
    if (got[0], got[1]) != (iv.start, iv.end):
        if t.producer is None:
            lines.append(f"- a {t.kind} is a leaf with its own storage: it is alive for the "
                         f"whole run, steps [0, {last}]")
        else:
            lines.append(f"- start: it is produced by node {t.producer} at step "
                         f"{pos[t.producer]}")
            readers = sorted(g.consumers[name], key=pos.__getitem__)
            if name in g.outputs:
                lines.append(f"- end: it is a graph output, so it stays alive to the last "
                             f"step, {last}")
            elif readers:
                lines.append(f"- end: its last reader is node {readers[-1]} at step "
                             f"{pos[readers[-1]]}")
            else:
                lines.append("- end: nobody reads it, so it dies at the step that "
                             "produces it")
            if got[1] == iv.end - 1:
                lines.append("- off by one: the end is INCLUSIVE - the tensor is still "
                             "alive while its last reader runs")
            elif got[1] == iv.end + 1:
                lines.append("- off by one: the end is the step of the last reader itself, "
                             "not the step after it")
    if got[2] != iv.bytes:
        if t.alias_of is not None:
            lines.append(f"- bytes: it is a parameter update written over {t.alias_of} in "
                         "place, so it has no bytes of its own (0)")
        else:
            raw = t.nbytes
            lines.append(f"- bytes: {int(np.prod(t.shape, dtype=np.int64))} elements x "
                         f"{np.dtype(t.dtype).itemsize} B = {raw} B, rounded up to a "
                         f"multiple of the alignment {case.alignment}: {iv.bytes} B")
            if got[2] == raw and raw != iv.bytes:
                lines.append("- you did not round up to the alignment")
    return "\n".join(lines)


def explain_minimum(case: GraphCase, ref: Liveness, got: int) -> str:
    live = ref.live_bytes()
    want = ref.theoretical_minimum()
    step = live.index(max(live)) if live else 0
    alive = [iv for iv in ref.planned() if iv.start <= step <= iv.end and iv.bytes]
    names = ", ".join(f"{iv.name} ({iv.bytes} B)" for iv in alive[:8])
    return (f"theoretical minimum: you said {got}, the rule gives {want} B - the largest "
            f"sum of planned bytes alive at one step (step {step}: {names}"
            f"{', ...' if len(alive) > 8 else ''}). Planned tensors are activations and "
            "gradients that are not graph outputs; inputs, parameters, constants and "
            "outputs keep their own storage and do not count.")


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
    if case.source == "private":
        return "(a private case: its graph is not shown)"
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
    code = graph_case_code(small, getattr(fn, "__name__", "fn"))
    if small is not case:
        o = _run(fn, small, time_limit, mode)
        ok, msg = judge_liveness(small, o)
        if not ok:
            code += "\n# on this graph: " + "\n#   ".join(msg.splitlines()[:6])
    return code


def graph_case_code(case: GraphCase, fn_name: str = "my_liveness") -> str:
    """Python that rebuilds the case and calls the function, with the expected answer."""
    g = case.graph
    ref = liveness(g, case.schedule, case.alignment)
    lines = ["from minigraph.graph import Graph, Node, TensorInfo", "nodes = ["]
    lines += [f"    {n!r}," for n in g.nodes]
    lines += ["]", "tensors = {t.name: t for t in ["]
    lines += [f"    {replace(t, value=None, init=None)!r}," for t in g.tensors.values()]
    lines += ["]}", f"graph = Graph.from_nodes(nodes, tensors, outputs={list(g.outputs)!r})",
              f"schedule = {list(case.schedule)!r}",
              f"intervals, minimum = {fn_name}(graph, schedule, alignment={case.alignment})",
              "# expected intervals (start, end, bytes):"]
    for iv in sorted(ref.intervals.values(), key=lambda iv: (iv.start, iv.name)):
        lines.append(f"#   {iv.name}: {(iv.start, iv.end, iv.bytes)}")
    lines.append(f"# expected minimum: {ref.theoretical_minimum()}")
    return "\n".join(lines)

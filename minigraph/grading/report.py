"""`GradeReport`: what a check returns - cases passed, the score, the first failure shrunk
to a reproducer, and a table against the library's own implementations."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

NOT_IMPLEMENTED = "not implemented yet"


@dataclass
class CaseResult:
    """One case: passed or not, the points it earned (0..1) and, if not, why."""
    name: str
    source: str
    passed: bool
    points: float
    message: str = ""
    seconds: float = 0.0
    metrics: dict[str, Any] = field(default_factory=dict)
    printed: str = ""


@dataclass
class GradeReport:
    """The result of `check_liveness`, `check_planner` or `check_heuristic`.

    `score` is out of 100 (the mean of the cases' points); `status` is "graded",
    "not implemented yet" or "stopped: ..." (too many time-outs). Never raises for a
    wrong solution: print it, or call `assert_full_marks()` in a test.
    """
    assignment: str
    cases: list[CaseResult]
    status: str = "graded"
    scoring: str = ""
    reproducer: str = ""
    comparison: list[dict[str, Any]] = field(default_factory=list)
    comparison_title: str = ""
    notes: list[str] = field(default_factory=list)
    isolation: str = ""      # one line when the submission was only partly isolated

    @property
    def total(self) -> int:
        return len(self.cases)

    @property
    def n_passed(self) -> int:
        return sum(c.passed for c in self.cases)

    @property
    def score(self) -> float:
        """Out of 100, rounded DOWN to two decimals: 100.0 only when every case earned its
        whole point (99.996 is 99.99, not full marks)."""
        if not self.cases or self.status == NOT_IMPLEMENTED or \
                self.status.startswith("not graded"):   # exited, hung, or changed the grader
            return 0.0
        if all(c.points >= 1.0 for c in self.cases):
            return 100.0
        mean = sum(c.points for c in self.cases) / len(self.cases)
        return min(math.floor(mean * 10_000 + 1e-6) / 100, 99.99)

    @property
    def score_text(self) -> str:
        """The score as printed: one decimal, or two where one would read 100.0 without
        being full marks (99.98 stays 99.98)."""
        text = f"{self.score:.1f}"
        return f"{self.score:.2f}" if text == "100.0" and self.score < 100 else text

    @property
    def full_marks(self) -> bool:
        return self.status == "graded" and bool(self.cases) and self.score >= 100.0

    @property
    def implemented(self) -> bool:
        return self.status != NOT_IMPLEMENTED

    @property
    def first_failure(self) -> CaseResult | None:
        return next((c for c in self.cases if not c.passed), None)

    def failures(self) -> list[CaseResult]:
        return [c for c in self.cases if not c.passed]

    def by_source(self) -> dict[str, tuple[int, int]]:
        out: dict[str, tuple[int, int]] = {}
        for c in self.cases:
            p, t = out.get(c.source, (0, 0))
            out[c.source] = (p + c.passed, t + 1)
        return out

    # Text ------------------------------------------------------------------------------
    def summary(self) -> str:
        if self.status == NOT_IMPLEMENTED:
            lines = [f"{self.assignment}: {NOT_IMPLEMENTED} (the function raises "
                     "NotImplementedError): fill in the stub, then check again."]
            lines += [f"  {n}" for n in self.notes]
            lines += [f"Isolation: {self.isolation}"] if self.isolation else []
            return "\n".join(lines)
        head = (f"{self.assignment}: {self.n_passed}/{self.total} cases passed, "
                f"score {self.score_text}/100")
        if self.status != "graded":
            head += f" ({self.status})"
        lines = [head]
        if self.scoring:
            lines.append(f"  scoring: {self.scoring}")
        src = self.by_source()
        if len(src) > 1:
            lines.append("  by case set: " + ", ".join(f"{k} {p}/{t}" for k, (p, t)
                                                       in src.items()))
        fail = self.first_failure
        if fail is not None:
            lines.append(f"First failing case: {fail.name} ({fail.source})")
            lines += ["  " + ln for ln in fail.message.splitlines()]
            if fail.printed:
                lines.append("  your function printed:")
                lines += ["    " + ln for ln in fail.printed.strip().splitlines()[-10:]]
            more = len(self.failures()) - 1
            if more:
                names = ", ".join(c.name for c in self.failures()[1:4])
                lines.append(f"  ({more} more failing: {names}{', ...' if more > 3 else ''})")
        elif self.score < 100.0:
            low = min(self.cases, key=lambda c: c.points)
            lines.append(f"Every case passed; the lowest-scoring one: {low.name} "
                         f"({100 * low.points:.0f}%): {low.message}")
        if self.reproducer:
            lines.append("Reproducer:")
            lines += ["  " + ln for ln in self.reproducer.splitlines()]
        if self.comparison:
            lines.append(self.comparison_title or "Comparison:")
            lines += ["  " + ln for ln in _table(self.comparison).splitlines()]
        lines += [f"Note: {n}" for n in self.notes]
        if self.isolation:
            lines.append(f"Isolation: {self.isolation}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        import html
        colour = "#1a7f37" if self.full_marks else ("#9a6700" if self.implemented
                                                    else "#57606a")
        return (f"<pre style='border-left: 4px solid {colour}; padding-left: 8px'>"
                f"{html.escape(self.summary())}</pre>")

    def to_dict(self) -> dict[str, Any]:
        """Plain data for a CI log or a gradebook."""
        return {"assignment": self.assignment, "status": self.status, "score": self.score,
                "passed": self.n_passed, "total": self.total, "isolation": self.isolation,
                "cases": [{"name": c.name, "source": c.source, "passed": c.passed,
                           "points": round(c.points, 4), "message": c.message,
                           "metrics": c.metrics} for c in self.cases],
                "reproducer": self.reproducer, "comparison": self.comparison}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, default=str)

    def to_gradescope(self) -> dict[str, Any]:
        """Gradescope's results.json: the score out of 100 and one test per case worth
        100 / cases (so the tests add up to the score); private cases are shown only
        after the grades are published. Spec: gradescope-autograders.readthedocs.io."""
        n = max(len(self.cases), 1)
        share = 100.0 / n
        implemented = self.status != NOT_IMPLEMENTED
        tests = []
        for c in self.cases:
            output = c.message or ("passed" if c.passed else "failed")
            if c.printed:
                output += "\nyour function printed:\n" + c.printed.strip()[-1000:]
            t = {"name": f"{self.assignment}: {c.name}",
                 "score": round(share * c.points, 4) if implemented else 0.0,
                 "max_score": round(share, 4), "output": output,
                 "status": "passed" if c.passed else "failed"}
            if c.source == "private":
                t["visibility"] = "after_published"
            tests.append(t)
        return {"score": self.score, "output": self.summary(), "tests": tests}

    def assert_full_marks(self) -> GradeReport:
        """Raise AssertionError with the summary unless every case earned full points."""
        if not self.full_marks:
            raise AssertionError("\n" + self.summary())
        return self

    def assert_passed(self) -> GradeReport:
        """Raise AssertionError with the summary unless every case passed (points aside)."""
        if self.status != "graded" or self.n_passed != self.total:
            raise AssertionError("\n" + self.summary())
        return self


def progress_line(k: int, n: int, r: CaseResult, seconds: float) -> str:
    """One line per judged case, printed while a check runs (a long check must not look
    hung): position, name, verdict, points, seconds (the run and the judging)."""
    verdict = "ok" if r.passed else "FAILED"
    first = clip(r.message.splitlines()[0], 70) if r.message else ""
    return (f"  [{k:>{len(str(n))}}/{n}] {r.name:<24} {verdict:<6} {100 * r.points:5.1f}%"
            f" {seconds:6.1f} s" + (f"  {first}" if first and not r.passed else ""))


def clip(text: str, width: int) -> str:
    """`text` cut to at most `width` characters at a space, with "..." where it was cut."""
    if len(text) <= width:
        return text
    cut = text[:width - 3].rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:(") + "..."


def run_cases(cases: Sequence[Any], run: Callable[[Any], Any],
              judge: Callable[[Any, Any], CaseResult], max_timeouts: int,
              progress: bool = False,
              not_implemented: Callable[[Any], bool] | None = None
              ) -> tuple[list[CaseResult], list[Any], str]:
    """Run and judge the cases in order -> (results, outcomes, status), printing each as it
    is judged with `progress`. After `max_timeouts` time-outs the remaining cases are
    marked "not run" and the status says so. A case the stub answered (`not_implemented`
    of its outcome; default: it raised NotImplementedError) prints no line until a case
    that is not: a stub's check prints only its report, "not implemented yet"."""
    stub = not_implemented or _raised_not_implemented
    results: list[CaseResult] = []
    outcomes: list[Any] = []
    held: list[str] | None = []     # the lines of the stub's cases so far
    timeouts, status = 0, "graded"
    for k, case in enumerate(cases):
        t0 = time.perf_counter()
        out = run(case)
        outcomes.append(out)
        results.append(judge(case, out))
        if case.source == "private":
            conceal(results[-1], out)
        if progress:
            line = progress_line(k + 1, len(cases), results[-1], time.perf_counter() - t0)
            if held is not None and stub(out):
                held.append(line)
            else:
                for ln in held or ():
                    print(ln, flush=True)
                held = None
                print(line, flush=True)
        timeouts += out.status == "timeout"
        if timeouts >= max_timeouts and k + 1 < len(cases):
            status = f"stopped: {timeouts} time-outs, {len(cases) - k - 1} cases not run"
            results += [CaseResult(c.name, c.source, False, 0.0, "not run (stopped after "
                                   "repeated time-outs)") for c in cases[k + 1:]]
            break
    return results, outcomes, status


# What a private case's message may say: the rule its answer broke, found by a phrase of
# the graders' own messages, never the message itself (it may quote the case's content,
# and so may what the function printed or raised).
PRIVATE_RULES = (
    ("off by one", "an interval is off by one (the end is inclusive)"),
    ("did not round up to the alignment", "bytes not rounded up to the alignment"),
    ("no bytes of its own", "a parameter update has no bytes of its own"),
    ("theoretical minimum", "wrong theoretical minimum"),
    ("no interval for tensor", "a tensor has no interval"),
    ("is not a tensor of this graph", "an interval for a name that is no tensor"),
    ("you said (start, end, bytes)", "a wrong interval"),
    ("validator rejects", "the validator rejects the plan"),
    ("not one of the buffers", "an offset for an id that is no buffer"),
    ("running the graph in", "the graph's outputs are wrong in this arena"),
    ("is larger than", "valid, but a larger arena than the baseline's"),
    ("PINNED", "a pinned tensor got the lowest score"),
    ("a score must be a number", "a score that is not a number"),
    ("thrashed", "the run thrashed"),
    ("got stuck", "the run got stuck"),
    ("do not replay", "the eviction choices do not replay"),
    ("the arena reached", "over the budget"),
    ("outputs differ", "the outputs differ from a plain run"),
    ("against the target's", "correct, but more compute than the target's"),
    ("your heuristic raised", "the heuristic raised an exception"),
    ("expected", "an answer of the wrong type"),
)
STATUS_RULES = {"error": "the function raised an exception",
                "timeout": "the function did not finish within the time limit",
                "crash": "the function crashed its process",
                "lost": "the function could not be run"}


def conceal(r: CaseResult, out: Any) -> None:
    """Keep a private case's content out of every report: its message becomes the rule
    broken, and what the function printed is dropped."""
    r.printed = ""
    if r.passed and not r.message:
        return
    rule = STATUS_RULES.get(getattr(out, "status", ""), "")
    if not rule:
        rule = next((why for phrase, why in PRIVATE_RULES if phrase in r.message),
                    "a wrong answer")
    r.message = f"private case {'passed' if r.passed else 'failed'}: {rule}"


def _raised_not_implemented(o: Any) -> bool:
    return o.error_type == "NotImplementedError"


def finish_report(report: GradeReport, cases: Sequence[Any], results: Sequence[CaseResult],
                  outcomes: Sequence[Any], reproduce: Callable[[Any, Any], str],
                  not_implemented: Callable[[Any], bool] = _raised_not_implemented) -> bool:
    """Mark `report` NOT_IMPLEMENTED if every run was a stub, or "not graded" if no run
    could be made (the file did not load: returns True, nothing more to add), else attach
    a reproducer for the first failing case that ran (returns False)."""
    if outcomes and all(not_implemented(o) for o in outcomes):
        report.status = NOT_IMPLEMENTED
        return True
    if outcomes and all(o.status == "lost" for o in outcomes):
        report.status = "not graded: " + outcomes[0].error.splitlines()[0]
        return True
    first = next((i for i, r in enumerate(results) if not r.passed), None)
    if first is not None and first < len(outcomes):
        report.reproducer = reproduce(cases[first], outcomes[first])
    return False


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "-" if math.isnan(v) else f"{v:.3f}"
    return str(v)


def _table(rows: Sequence[dict[str, Any]]) -> str:
    cols = list(rows[0])
    cells = [[_fmt(r.get(c, "")) for c in cols] for r in rows]
    width = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    out = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                     enumerate(zip(cols, width)))]
    for row in cells:
        out.append("  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in
                             enumerate(zip(row, width))))
    return "\n".join(out)


def geometric_mean(xs: Sequence[float]) -> float:
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")

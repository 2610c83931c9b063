"""Write `answers.json`: what the reference solutions answer on the public cases, for the
students' repository, where the grader has no reference solution to run.

    python -m minigraph.grading.answers            # rewrite it (needs the reference solutions)
    python -m minigraph.grading.answers --check    # exit 1 unless it is what they answer now

A1: every public and generated case of seed 0 - its fingerprint and the digest of the
expected answer (`reference.answer_digest`: the copies, the hand-overs and the minimum
cannot be read back); part B's cases also the digest of the copies alone
(`reference.copies_digest`). A2: each case's digest (`planner_grader.case_digest`) and
the reference planner's arena (the target). A3: each public case's arena budget and the reference
heuristic's compute overhead (the target). Run it after changing a case or a reference
solution; tests/test_grading.py checks that the file is current.
"""

from __future__ import annotations

import json
import sys

from ..files import write_text
from .cases import liveness_cases, planner_cases
from .heuristic_grader import budget_for, case_program, heuristic_cases, reference_overhead
from .liveness_grader import case_key, expected
from .planner_grader import case_digest, reference_arena
from .reference import ANSWERS, answer_digest, copies_digest, reference_function


def compute() -> dict:
    """The answers, from the reference solutions (which must be here)."""
    if any(reference_function(a) is None for a in ("a1", "a2", "a3")):
        raise SystemExit("the reference solutions are not here: lessons/assignments/solutions/")
    a1 = {}
    for case in liveness_cases():
        intervals, minimum, *handovers = expected(case)
        key = case_key(case)
        a1[case.name] = {"key": key, "digest": answer_digest(key, intervals, minimum,
                                                             *handovers)}
        if case.inplace:
            a1[case.name]["copies"] = copies_digest(key, intervals)
    a2 = {case.name: [case_digest(case), reference_arena(case)] for case in planner_cases()}
    a3 = {}
    for case in heuristic_cases():
        budget, _ = budget_for(case_program(case), case.ratio, case.ratio_of)
        a3[case.name] = [budget, reference_overhead(case)]
    return {"a1": a1, "a2": a2, "a3": a3}


def text(answers: dict) -> str:
    """One line per case: small enough to diff."""
    parts = []
    for key, cases in answers.items():
        body = ",\n".join(f"  {json.dumps(name)}: {json.dumps(v, separators=(',', ':'))}"
                          for name, v in cases.items())
        parts.append(f"{json.dumps(key)}: {{\n{body}\n}}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def main(args: list[str]) -> int:
    if set(args) - {"--check"}:
        sys.exit(__doc__)
    new = text(compute())
    if "--check" in args:
        old = ANSWERS.read_text(encoding="utf-8") if ANSWERS.exists() else ""
        if old != new:
            print(f"{ANSWERS} is stale: run `python -m minigraph.grading.answers`")
            return 1
        return 0
    write_text(ANSWERS, new)       # whole or not at all
    print(f"wrote {ANSWERS} ({len(new) // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

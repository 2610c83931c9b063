"""`python -m minigraph.grading a1|a2|a3 [FILE] [--json OUT] [--min-score S]`.

Grades FILE (a .py or .ipynb; default: the reference solution) and prints the report.
Exit status 0 when the score reaches --min-score (default 100), else 1: what a GitHub
Classroom "command grader" step needs.
"""

from __future__ import annotations

import argparse
import sys

from . import ASSIGNMENTS, grade


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m minigraph.grading",
                                 description="Grade a minigraph assignment.")
    ap.add_argument("assignment", choices=sorted(ASSIGNMENTS))
    ap.add_argument("file", nargs="?", help="the student's .py or .ipynb")
    ap.add_argument("--json", help="also write the report as JSON here")
    ap.add_argument("--min-score", type=float, default=100.0)
    ap.add_argument("--private", help="directory of private cases (or MINIGRAPH_PRIVATE_CASES)")
    args = ap.parse_args(argv)
    kw = {"private": args.private} if args.private else {}
    try:
        report = grade(args.assignment, args.file, **kw)
    except Exception as e:   # noqa: BLE001  a file that does not even load
        print(f"could not load {args.file}: {type(e).__name__}: {e}")
        return 1
    print(report.summary())
    if args.json:
        with open(args.json, "w") as f:
            f.write(report.to_json())
    return 0 if report.status == "graded" and report.score >= args.min_score else 1


if __name__ == "__main__":
    sys.exit(main())

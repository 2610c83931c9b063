"""The grader's command: `python -m minigraph.grading a1|a2|a3 [FILE] [--json OUT]
[--gradescope OUT] [--min-score S] [--private DIR] [--quiet]`.

Grades FILE (a .py or .ipynb; default: the reference solution), imported and run only in
a child process (`submission.Submission`), printing each case as it is judged, then the
report. Exit status 0 when the score reaches --min-score (default 100), else 1 (a file
that cannot be loaded, exits, hangs or sends garbage included): what a GitHub Classroom
"command grader" step needs. --gradescope writes Gradescope's results.json. The files
are written once every process of FILE is gone, each in one step (a new file renamed
over the old: a file someone made at that path beforehand is replaced, not written
through).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

from . import ASSIGNMENTS, grade


def write_file(path: str, text: str) -> None:
    """Write `text` to `path` at once: a new file beside it, then renamed over it."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".minigraph-", dir=folder)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m minigraph.grading",
                                 description="Grade a minigraph assignment.")
    ap.add_argument("assignment", choices=sorted(ASSIGNMENTS))
    ap.add_argument("file", nargs="?", help="the student's .py or .ipynb")
    ap.add_argument("--json", help="also write the report as JSON here")
    ap.add_argument("--gradescope", metavar="RESULTS_JSON",
                    help="also write Gradescope's results.json here")
    ap.add_argument("--min-score", type=float, default=100.0)
    ap.add_argument("--private", help="directory of private cases (or MINIGRAPH_PRIVATE_CASES)")
    ap.add_argument("--quiet", action="store_true", help="no line per case, only the report")
    args = ap.parse_intermixed_args(argv)   # options may come before or after FILE
    kw = {"private": args.private} if args.private else {}
    try:
        report = grade(args.assignment, args.file, progress=not args.quiet, **kw)
    except FileNotFoundError as e:
        print(f"could not grade {args.file}: {e}")
        if args.gradescope:
            write_file(args.gradescope, json.dumps(
                {"score": 0.0, "output": f"could not grade: {e}", "tests": []}))
        return 1
    print(report.summary())
    if args.json:
        write_file(args.json, report.to_json())
    if args.gradescope:
        write_file(args.gradescope, json.dumps(report.to_gradescope(), indent=1, default=str))
    return 0 if report.status == "graded" and report.score >= args.min_score else 1


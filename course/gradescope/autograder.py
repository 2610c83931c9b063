"""Grade one Gradescope submission: what each assignment's `run_autograder` runs.

    python autograder.py a1        # from /autograder/run_autograder

Gradescope lays out a root folder (`AUTOGRADER_ROOT`, default /autograder): `source/` is the
unzipped autograder (this file, `repo/` - minigraph with the reference solutions - and
`private/` if the zip has private cases), `submission/` what the student handed in, and
`results/results.json` is what it reads back. This finds the student's file - the
assignment's notebook anywhere in `submission/`, else its only .ipynb or .py - grades it with
`python -m minigraph.grading aN FILE --gradescope results/results.json` run in `repo/`, and
prints the report (Gradescope shows it to the instructor; the student sees results.json).
No file, or several and no notebook of that name: a results.json with score 0 that says
which file was expected.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

NOTEBOOKS = {"a1": "A1_liveness.ipynb", "a2": "A2_planner.ipynb", "a3": "A3_eviction.ipynb"}


def find_submission(folder: Path, assignment: str) -> tuple[Path | None, str]:
    """(the file to grade, "") or (None, why not)."""
    want = NOTEBOOKS[assignment]
    named = sorted(folder.rglob(want), key=lambda p: (len(p.parts), str(p)))
    if named:
        return named[0], ""
    files = sorted(p for p in folder.rglob("*") if p.suffix in (".ipynb", ".py")
                   and p.is_file() and ".ipynb_checkpoints" not in p.parts)
    if len(files) == 1:
        return files[0], ""
    found = ", ".join(str(p.relative_to(folder)) for p in files[:8]) or "no .ipynb or .py"
    return None, (f"submit your notebook {want} (or one .py file defining the assignment's "
                  f"function); found: {found}")


def main(args: list[str]) -> int:
    if len(args) != 1 or args[0] not in NOTEBOOKS:
        sys.exit(__doc__)
    assignment = args[0]
    root = Path(os.environ.get("AUTOGRADER_ROOT", "/autograder"))
    source, results = root / "source", root / "results" / "results.json"
    results.parent.mkdir(parents=True, exist_ok=True)
    path, why = find_submission(root / "submission", assignment)
    if path is None:
        results.write_text(json.dumps({"score": 0.0, "output": f"not graded: {why}",
                                       "tests": []}))
        print(why)
        return 0
    cmd = [sys.executable, "-m", "minigraph.grading", assignment, str(path), "--quiet",
           "--gradescope", str(results)]
    if (source / "private").is_dir():
        cmd += ["--private", str(source / "private")]
    run = subprocess.run(cmd, cwd=source / "repo")   # -m imports this minigraph: repo's
    if not results.exists():   # the grader itself failed: say so rather than nothing
        results.write_text(json.dumps({"score": 0.0, "output": "the autograder failed "
                                       f"(exit status {run.returncode}); see its log",
                                       "tests": []}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

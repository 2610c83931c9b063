"""Compare nbgrader's scores with the standalone grader's, notebook by notebook.

    cd course && python crosscheck.py a1          # after `nbgrader autograde a1`

For every student with an autograded notebook of the assignment, runs
`python -m minigraph.grading a1 autograded/<student>/a1/A1_liveness.ipynb` (in its own
process, with the environment's private cases, as nbgrader's kernel had them) and reads the
student's score from gradebook.db. Prints one line per student and exits 1 when a score
differs: nbgrader runs the check inside the student's kernel, where their code could tamper
with it; the standalone grader runs their code in a child process and checks in its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from make_source import NOTEBOOKS

TOLERANCE = 0.01          # both sides round the score to two decimals


def grader_score(assignment: str, notebook: Path) -> float:
    """The score `python -m minigraph.grading` gives the notebook (0 if it cannot load)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        subprocess.run([sys.executable, "-m", "minigraph.grading", assignment, str(notebook),
                        "--json", str(out), "--min-score", "0"], capture_output=True)
        return float(json.loads(out.read_text())["score"]) if out.exists() else 0.0


def nbgrader_scores(assignment: str, db: str = "sqlite:///gradebook.db") -> dict[str, float]:
    """student id -> the score nbgrader's gradebook holds for this assignment."""
    from nbgrader.api import Gradebook, MissingEntry
    scores = {}
    with Gradebook(db) as gb:
        for student in gb.students:
            try:
                scores[student.id] = float(gb.find_submission(assignment, student.id).score)
            except MissingEntry:
                continue
    return scores


def crosscheck(assignment: str) -> list[dict]:
    """One row per autograded student: both scores and whether they agree."""
    name, _ = NOTEBOOKS[assignment]
    rows = []
    graded = nbgrader_scores(assignment)
    for notebook in sorted(Path("autograded").glob(f"*/{assignment}/{name}.ipynb")):
        student = notebook.parts[1]
        score = grader_score(assignment, notebook)
        nbg = graded.get(student)
        rows.append({"student": student, "nbgrader": nbg, "grader": score,
                     "agree": nbg is not None and abs(nbg - score) <= TOLERANCE})
    return rows


def main(args: list[str]) -> int:
    if len(args) != 1 or args[0] not in NOTEBOOKS:
        sys.exit(__doc__)
    rows = crosscheck(args[0])
    if not rows:
        print(f"no autograded notebooks of {args[0]}: run `nbgrader autograde {args[0]}` first")
        return 1
    print(f"{'student':16} {'nbgrader':>9} {'grader':>8}")
    for r in rows:
        nbg = "-" if r["nbgrader"] is None else f"{r['nbgrader']:.2f}"
        flag = "" if r["agree"] else "   DIFFERENT: read this submission"
        print(f"{r['student']:16} {nbg:>9} {r['grader']:8.2f}{flag}")
    return 0 if all(r["agree"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""nbgrader's autograde, made to give the sandboxed grader's score (docs/teaching.md).

`nbgrader autograde` runs a notebook's check cell in the student's own kernel, after
their code: a notebook that replaces `check_liveness` there prints whatever score it
likes, and nbgrader would store it. `SandboxedScore` runs right after nbgrader's
`Execute`: for the check cell of each notebook it grades the same notebook with
`python -m minigraph.grading` (the student's code in the sandbox's child process, the
checks in the grader's own), and makes that score the cell's result, the number nbgrader
reads as the cell's points. Where the kernel's number differs, the cell also says so on
stdout. So `gradebook.db` and `grades.csv` hold the sandboxed score, never a forged one
(nor one earned with the library's own planner, liveness or heuristic: the sandbox
refuses those, `minigraph.grading.sandbox.imports`);
`crosscheck.py` still lists both, to show whom to read. nbgrader_config.py puts it in
`Autograde.autograde_preprocessors`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from nbconvert.preprocessors import Preprocessor
from nbformat.v4 import new_output


def is_check_cell(cell) -> bool:
    """The autograded test cell that grades (tagged "check", nbgrader grade without
    solution)."""
    nbg = cell.get("metadata", {}).get("nbgrader", {})
    return (cell.get("cell_type") == "code" and nbg.get("grade") and not nbg.get("solution")
            and "check" in cell.get("metadata", {}).get("tags", []))


def kernel_score(cell) -> str | None:
    """The number the kernel's check cell ended with (its execute_result), if any."""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "execute_result":
            text = out.get("data", {}).get("text/plain", "")
            return "".join(text) if isinstance(text, list) else text
    return None


def sandboxed_score(assignment: str, notebook: dict) -> tuple[float, str]:
    """(score, status) that `python -m minigraph.grading` gives `notebook` (0 and the
    reason when it cannot be graded)."""
    with tempfile.TemporaryDirectory() as tmp:
        path, out = Path(tmp) / "submission.ipynb", Path(tmp) / "report.json"
        path.write_text(json.dumps(notebook), encoding="utf-8")
        run = subprocess.run([sys.executable, "-m", "minigraph.grading", assignment, str(path),
                              "--quiet", "--json", str(out), "--min-score", "0"],
                             capture_output=True, text=True)
        if not out.exists():
            return 0.0, f"not graded: {(run.stdout + run.stderr).strip()[-300:]}"
        report = json.loads(out.read_text())
        return float(report["score"]), str(report["status"])


class SandboxedScore(Preprocessor):
    """After nbgrader's Execute: the check cell's result becomes the sandboxed grader's
    score of the same notebook."""

    def preprocess(self, nb, resources):
        assignment = resources["nbgrader"]["assignment"]
        for cell in nb.cells:
            if not is_check_cell(cell):
                continue
            score, status = sandboxed_score(assignment, nb)
            kernel = kernel_score(cell)
            points = float(cell.metadata["nbgrader"]["points"])
            outputs = [o for o in cell.outputs if o.get("output_type") != "execute_result"]
            if kernel is None or kernel.strip() != f"{score}":
                outputs.append(new_output("stream", name="stdout", text=(
                    f"The sandboxed grader (python -m minigraph.grading {assignment}) scores "
                    f"this notebook {score} ({status}); the check in your kernel said "
                    f"{kernel}. The gradebook holds the sandboxed score.\n")))
            outputs.append(new_output("execute_result", execution_count=cell.get(
                "execution_count"), data={"text/plain": f"{min(score, points)}"}))
            cell.outputs = outputs
        return nb, resources

"""Copy this repository without what students must not receive.

    python course/student_repo.py DEST

Copies the files git tracks, less `lessons/assignments/solutions/` (the reference solutions),
`course/` (the instructor's side: nbgrader's configuration and scripts, the rubrics of the
written answers, the slides' packages) and `docs/teaching.md` (the instructor's guide), into
DEST, a new folder. Make DEST the students' repository: the template of a Classroom
assignment and what their Binder badge builds. Grading there needs `--student`
(docs/teaching.md).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: what stays with the instructor (paths relative to the repository)
WITHHELD = ("lessons/assignments/solutions/", "course/", "docs/teaching.md")


def student_files(root: Path = ROOT) -> list[str]:
    """The paths git tracks, less the withheld ones (files deleted in the work tree too)."""
    run = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"{root} is not a git checkout: {run.stderr.strip()}")
    return [p for p in run.stdout.split("\0")
            if p and not p.startswith(WITHHELD) and (root / p).is_file()]


def main(args: list[str]) -> int:
    if len(args) != 1:
        sys.exit(__doc__)
    dest = Path(args[0])
    if dest.exists() and any(dest.iterdir()):
        sys.exit(f"{dest} exists and is not empty: give a new folder")
    files = student_files()
    for rel in files:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    print(f"copied {len(files)} files to {dest}, without {', '.join(WITHHELD)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

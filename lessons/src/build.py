"""Build the lesson and assignment notebooks from their sources.

    python lessons/src/build.py [NAMES...]                 # lessons/NN_name.ipynb
    python lessons/src/build.py --assignments [NAMES...]   # lessons/assignments/AN_name.ipynb
    python lessons/src/build.py --all                      # both

A source is a Python file in "percent" format: `# %%` starts a code cell, `# %% [markdown]`
a markdown cell whose lines are written as comments (`# text`). A cell may carry tags,
`# %% tags=["solution"]` (the stub a student fills in) or `# %% tags=["check"]` (the
grading cell, which a grader skips when it loads the notebook as a solution); they go to
the cell's `metadata.tags`. Notebooks are written with no outputs and stable cell ids, so a
rebuild of an unchanged source gives the same file (clean diffs).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import NamedTuple

import nbformat

SRC = Path(__file__).resolve().parent
OUT = SRC.parent
ROOT = OUT.parent
MARK = re.compile(r"^# %%(?P<md> \[markdown\])?(?:\s+tags=(?P<tags>\[.*\]))?\s*$")


class Collection(NamedTuple):
    """Where one set of notebooks comes from and goes to."""
    src: Path           # folder of the percent-format sources
    out: Path           # folder the notebooks are written to
    pattern: str        # glob of the sources in `src`
    kernel_name: str    # the kernelspec's display name written into each notebook


LESSONS = Collection(SRC, OUT, "[0-9][0-9]_*.py", "Python 3 (ipykernel)")
ASSIGNMENTS = Collection(OUT / "assignments" / "src", OUT / "assignments", "A[0-9]_*.py",
                         "Python 3")


def cells_of(text: str) -> list[tuple[str, str, list[str]]]:
    """(kind, source, tags) of each cell of a percent-format file."""
    cells: list[tuple[str, list[str], list[str]]] = []
    for line in text.splitlines():
        m = MARK.match(line)
        if m:
            tags = json.loads(m.group("tags")) if m.group("tags") else []
            cells.append(("markdown" if m.group("md") else "code", [], tags))
            continue
        if not cells:
            continue                    # a preamble before the first marker is not a cell
        kind, lines, _ = cells[-1]
        if kind == "markdown":
            line = line[2:] if line.startswith("# ") else line.lstrip("#")
        lines.append(line)
    out = []
    for kind, lines, tags in cells:
        while lines and not lines[-1].strip():
            lines.pop()
        while lines and not lines[0].strip():
            lines.pop(0)
        if lines:
            out.append((kind, "\n".join(lines), tags))
    return out


def build(src: Path, coll: Collection = LESSONS) -> Path:
    """Write the notebook of one source into `coll.out`; return its path."""
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"name": "python3", "display_name": coll.kernel_name,
                                  "language": "python"},
                   "language_info": {"name": "python"}}
    for k, (kind, source, tags) in enumerate(cells_of(src.read_text())):
        cell = (nbformat.v4.new_markdown_cell if kind == "markdown" else
                nbformat.v4.new_code_cell)(source)
        cell.id = f"{src.stem.replace('_', '-').lower()}-{k:02d}"
        if tags:
            cell.metadata["tags"] = tags
        nb.cells.append(cell)
    nbformat.validate(nb)
    dest = coll.out / f"{src.stem}.ipynb"
    nbformat.write(nb, dest)
    return dest


def build_all(names: list[str], coll: Collection = LESSONS) -> None:
    """Build the sources of `coll` whose names start with one of `names` (all if none)."""
    sources = sorted(coll.src.glob(coll.pattern))
    if names:
        sources = [s for s in sources if any(s.stem.startswith(n) for n in names)]
    for s in sources:
        print(f"{s.relative_to(ROOT)} -> {build(s, coll).relative_to(ROOT)}")


def main(args: list[str]) -> None:
    names = [a for a in args if not a.startswith("--")]
    flags = set(args) - set(names)
    unknown = flags - {"--assignments", "--all"}
    if unknown:
        sys.exit(f"unknown option(s) {sorted(unknown)}; usage: see {__doc__}")
    if "--assignments" not in flags or "--all" in flags:
        build_all(names, LESSONS)
    if "--assignments" in flags or "--all" in flags:
        build_all(names, ASSIGNMENTS)


if __name__ == "__main__":
    main(sys.argv[1:])

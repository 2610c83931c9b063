"""Build the assignment notebooks from their sources: `python lessons/assignments/src/build.py`.

Sources are "percent" files like the lessons' (lessons/src/build.py): `# %%` starts a code
cell, `# %% [markdown]` a markdown cell written as comments; a code cell may carry tags,
`# %% tags=["solution"]` (the stub the student fills in) or `# %% tags=["check"]` (the
grading cell, which a grader skips when it loads the notebook as a solution). Notebooks
are written to lessons/assignments/ with no outputs and stable cell ids.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat

SRC = Path(__file__).resolve().parent
OUT = SRC.parent
MARK = re.compile(r"^# %%(?P<md> \[markdown\])?(?:\s+tags=(?P<tags>\[.*\]))?\s*$")


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
            continue
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


def build(src: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3",
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
    dest = OUT / f"{src.stem}.ipynb"
    nbformat.write(nb, dest)
    return dest


def main(names: list[str]) -> None:
    sources = sorted(SRC.glob("A[0-9]_*.py"))
    if names:
        sources = [s for s in sources if any(s.stem.startswith(n) for n in names)]
    for s in sources:
        print(f"{s.relative_to(OUT.parent.parent)} -> {build(s).relative_to(OUT.parent.parent)}")


if __name__ == "__main__":
    main(sys.argv[1:])

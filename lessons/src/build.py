"""Build the lesson notebooks from their sources: `python lessons/src/build.py [NAMES...]`.

A source is a Python file in "percent" format: `# %%` starts a code cell, `# %% [markdown]`
a markdown cell whose lines are written as comments (`# text`). The notebooks are written
next to this folder (lessons/NN_name.ipynb) with no outputs and stable cell ids, so a
rebuild of an unchanged source gives the same file (clean diffs).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

SRC = Path(__file__).resolve().parent
OUT = SRC.parent
MARK = re.compile(r"^# %%(?P<md> \[markdown\])?\s*$")


def cells_of(text: str) -> list[tuple[str, str]]:
    """(kind, source) of each cell of a percent-format file."""
    cells: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        m = MARK.match(line)
        if m:
            cells.append(("markdown" if m.group("md") else "code", []))
            continue
        if not cells:
            continue                    # a preamble before the first marker is not a cell
        kind, lines = cells[-1]
        if kind == "markdown":
            line = line[2:] if line.startswith("# ") else line.lstrip("#")
        lines.append(line)
    out = []
    for kind, lines in cells:
        while lines and not lines[-1].strip():
            lines.pop()
        while lines and not lines[0].strip():
            lines.pop(0)
        if lines:
            out.append((kind, "\n".join(lines)))
    return out


def build(src: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                  "language": "python"},
                   "language_info": {"name": "python"}}
    for k, (kind, source) in enumerate(cells_of(src.read_text())):
        cell = (nbformat.v4.new_markdown_cell if kind == "markdown" else
                nbformat.v4.new_code_cell)(source)
        cell.id = f"{src.stem.replace('_', '-')}-{k:02d}"
        nb.cells.append(cell)
    nbformat.validate(nb)
    dest = OUT / f"{src.stem}.ipynb"
    nbformat.write(nb, dest)
    return dest


def main(names: list[str]) -> None:
    sources = sorted(SRC.glob("[0-9][0-9]_*.py"))
    if names:
        sources = [s for s in sources if any(s.stem.startswith(n) for n in names)]
    for s in sources:
        print(f"{s.relative_to(OUT.parent)} -> {build(s).relative_to(OUT.parent)}")


if __name__ == "__main__":
    main(sys.argv[1:])

"""Build every lesson and assignment notebook from its source with jupytext.

    python lessons/src/build.py            # rewrite the notebooks
    python lessons/src/build.py --check    # exit 1 if a notebook is not its source's build

`lessons/src/NN_name.py` (or `NNb_name.py`, a lesson between NN and NN+1) gives
`lessons/NN_name.ipynb` and `lessons/assignments/src/AN_name.py`
gives `lessons/assignments/AN_name.ipynb`. A source is a jupytext "percent" script: `# %%`
starts a code cell, `# %% [markdown]` a markdown cell written as comments, and
`# %% tags=["solution"]` sets the cell's tags. Jupytext does the conversion; this script adds
only what a text file does not carry: a Python kernel, and cell ids numbered in order (jupytext
draws random ones), so that rebuilding an unchanged source gives the same bytes; and, in
a lesson (not an assignment), each cell's slide type, so that

    jupyter nbconvert --to slides lessons/07_dtr.ipynb

makes reveal.js slides: a cell that opens with a title or a section heading (`# `, `## `)
starts a new slide, every other cell is a slide below it (a subslide). One cell is one
slide, so a slide fits the screen when its cell does: a markdown cell of at most
`SLIDE_MARKDOWN_LINES` lines, a code cell of at most `SLIDE_CODE_LINES`
(tests/test_slides.py holds every lesson to it).
"""

from __future__ import annotations

import sys
from pathlib import Path

import jupytext

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # minigraph from this checkout

from minigraph.files import write_text  # noqa: E402

LESSONS = Path(__file__).resolve().parents[1]
KERNEL = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
SLIDE_MARKDOWN_LINES = 24      # a markdown slide at most this many lines
SLIDE_CODE_LINES = 40          # a code slide at most this many lines


def is_lesson(src: Path) -> bool:
    """A lesson's source (lessons/src/), not an assignment's."""
    return src.parent == LESSONS / "src"


def slide_type(cell) -> str:
    """"slide" for a cell that opens with a title or a section heading, else "subslide"."""
    first = cell.source.lstrip().split("\n", 1)[0]
    heading = cell.cell_type == "markdown" and (first.startswith("# ") or
                                                first.startswith("## "))
    return "slide" if heading else "subslide"


def sources() -> list[Path]:
    """Every lesson and assignment source, in order."""
    return (sorted([*LESSONS.glob("src/[0-9][0-9]_*.py"),
                    *LESSONS.glob("src/[0-9][0-9][a-z]_*.py")])
            + sorted(LESSONS.glob("assignments/src/A[0-9]_*.py")))


def notebook_path(src: Path) -> Path:
    """Where the notebook of `src` goes: the folder above `src/`."""
    return src.parent.parent / f"{src.stem}.ipynb"


def notebook_text(src: Path) -> str:
    """The notebook of one source as text: no outputs, numbered cell ids, a Python kernel."""
    nb = jupytext.read(src, fmt="py:percent")
    nb.metadata["kernelspec"] = KERNEL
    meta = nb.metadata.get("jupytext", {})
    if "cell_metadata_filter" in meta:   # jupytext lists the keys in set order, which
        keys = meta["cell_metadata_filter"].split(",")   # changes with the hash seed
        kept = sorted(k for k in keys if not k.startswith("-"))
        meta["cell_metadata_filter"] = ",".join(kept + [k for k in keys if k.startswith("-")])
    for k, cell in enumerate(nb.cells):
        cell.id = f"{src.stem.replace('_', '-').lower()}-{k:02d}"
        if is_lesson(src):
            cell.metadata["slideshow"] = {"slide_type": "slide" if k == 0 else slide_type(cell)}
    return jupytext.writes(nb, fmt="ipynb") + "\n"


def main(args: list[str]) -> int:
    if set(args) - {"--check"}:
        sys.exit(__doc__)
    check = "--check" in args
    built = {notebook_path(s): notebook_text(s) for s in sources()}
    status = 0
    for path, text in built.items():
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        name = path.relative_to(LESSONS.parent)
        if check:
            print(f"{name} is stale: run `python lessons/src/build.py`")
            status = 1
        else:
            write_text(path, text)       # whole or not at all (minigraph/files.py)
            print(f"wrote {name}")
    for path in sorted(LESSONS.glob("*.ipynb")) + sorted(LESSONS.glob("assignments/*.ipynb")):
        if path not in built:       # its source was renamed or deleted
            print(f"{path.relative_to(LESSONS.parent)} has no source: delete it")
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

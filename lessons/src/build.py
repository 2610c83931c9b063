"""Build every lesson and assignment notebook from its source with jupytext.

    python lessons/src/build.py            # rewrite the notebooks
    python lessons/src/build.py --check    # exit 1 if a notebook is not its source's build
    python lessons/src/build.py --slides DIR   # every lesson's deck, reveal.js beside it

`lessons/src/NN_name.py` (or `NNb_name.py`, a lesson between NN and NN+1, or `NNbb_name.py`,
one between NNb and NNc) gives
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

That command loads reveal.js, jQuery, RequireJS and MathJax from CDNs: in a room without a
network the deck is an unstyled page with its math as raw TeX. `--slides DIR` builds every
lesson's deck into DIR with those four copied beside it, from the npm packages that
course/slides/package.json pins (`npm ci --prefix course/slides` installs them, once), so
the folder opens offline. Its template (course/slides/template/offline/) is nbconvert's
reveal template with the math typeset by MathJax 3 through reveal.js's math plugin, and
with nothing else taken from the network (tests/test_slides.py checks every deck).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import jupytext

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # minigraph from this checkout

from minigraph.files import write_bytes, write_text  # noqa: E402

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
                    *LESSONS.glob("src/[0-9][0-9][a-z]_*.py"),
                    *LESSONS.glob("src/[0-9][0-9][a-z][a-z]_*.py")])
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


SLIDE_PACKAGES = LESSONS.parent / "course" / "slides" / "node_modules"
SLIDE_TEMPLATES = LESSONS.parent / "course" / "slides" / "template"
# What a deck needs beside it (in the npm packages -> in the slides folder). MathJax: its
# TeX-to-HTML component and the folders it loads from on demand (fonts, TeX extensions,
# the menu's accessibility tools), not its other builds.
SLIDE_ASSETS = {"reveal.js/dist": "reveal.js/dist", "reveal.js/plugin": "reveal.js/plugin",
                "jquery/dist/jquery.min.js": "jquery.min.js",
                "requirejs/require.js": "require.js",
                "mathjax/es5/tex-mml-chtml.js": "mathjax/tex-mml-chtml.js",
                **{f"mathjax/es5/{d}": f"mathjax/{d}"
                   for d in ("input", "output", "ui", "a11y", "sre", "adaptors")}}
MATHJAX = "mathjax/tex-mml-chtml.js"
# nbconvert's stylesheets cite their sources' web pages in comments; the decks drop the
# comments, so that no address is left in a deck but the lessons' own links.
STYLE = re.compile(r"<style[^>]*>.*?</style>", re.S)
CSS_COMMENT = re.compile(r"/\*.*?\*/", re.S)


def build_slides(out: Path, packages: Path = SLIDE_PACKAGES,
                 stems: set[str] | None = None) -> list[Path]:
    """Every lesson's reveal.js deck (or those whose source is named in `stems`) written
    to `out` (NN_name.slides.html), with reveal.js, jQuery, RequireJS and MathJax copied
    from `packages` beside the decks and linked by relative paths, so that the folder
    works offline; the decks written, in order."""
    from nbconvert import SlidesExporter  # only the slides need nbconvert, not the build

    missing = [name for name in SLIDE_ASSETS if not (packages / name).exists()]
    if missing:
        sys.exit(f"{packages / missing[0]} is missing: run `npm ci --prefix course/slides`")
    out.mkdir(parents=True, exist_ok=True)
    for name, there in SLIDE_ASSETS.items():
        src, dst = packages / name, out / there
        for f in sorted(src.rglob("*")) if src.is_dir() else [src]:
            if f.is_file():
                to = dst / f.relative_to(src) if src.is_dir() else dst
                to.parent.mkdir(parents=True, exist_ok=True)
                write_bytes(to, f.read_bytes())
    exporter = SlidesExporter(reveal_url_prefix="reveal.js", jquery_url="jquery.min.js",
                              require_js_url="require.js", mathjax_url=MATHJAX,
                              reveal_theme="white",   # "simple" imports Google's fonts
                              template_name="offline",
                              extra_template_basedirs=[str(SLIDE_TEMPLATES)])
    written = []
    for src in sources():
        if not is_lesson(src) or (stems is not None and src.stem not in stems):
            continue
        body, _ = exporter.from_filename(str(notebook_path(src)))
        body = STYLE.sub(lambda m: CSS_COMMENT.sub("", m[0]), body)
        path = out / f"{src.stem}.slides.html"
        write_text(path, body)
        written.append(path)
    return written


def main(args: list[str]) -> int:
    if args[:1] == ["--slides"] and len(args) == 2:
        for path in build_slides(Path(args[1])):
            print(f"wrote {path}")
        return 0
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

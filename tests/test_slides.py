"""Every lesson is also a reveal.js slide deck (`jupyter nbconvert --to slides`), and every
slide fits: lessons/src/build.py gives each cell its slide type (a heading opens a slide,
every other cell is a subslide below it), so one cell is one slide, and a slide fits when
its cell does - a markdown cell of at most SLIDE_MARKDOWN_LINES lines whose prose lines
(tables aside) stay under PROSE_WIDTH characters, a code cell of at most SLIDE_CODE_LINES.
Building the decks needs nbconvert (it comes with JupyterLab); without it those tests
skip."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "lessons").glob("[0-9][0-9]*_*.ipynb"))
PROSE_WIDTH = 110


def _build_module():
    """lessons/src/build.py, loaded by its path (it imports jupytext)."""
    if importlib.util.find_spec("jupytext") is None:
        return None
    spec = importlib.util.spec_from_file_location("lessons_build",
                                                  ROOT / "lessons" / "src" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = _build_module()


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _lines(cell: dict) -> list[str]:
    return "".join(cell["source"]).splitlines()


def test_there_is_a_deck_per_lesson() -> None:
    assert len(LESSONS) >= 12 and any("07b_" in p.name for p in LESSONS)


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_every_cell_is_a_slide_and_every_slide_fits(path: Path) -> None:
    if build is None:
        pytest.skip("jupytext is not installed")
    cells = _cells(path)
    assert cells[0]["metadata"]["slideshow"]["slide_type"] == "slide"
    for k, cell in enumerate(cells):
        kind = cell["metadata"].get("slideshow", {}).get("slide_type")
        assert kind in ("slide", "subslide"), f"cell {k} has no slide type"
        lines = _lines(cell)
        where = f"{path.name} cell {k} ({lines[0][:40] if lines else ''!r})"
        if cell["cell_type"] == "markdown":
            assert len(lines) <= build.SLIDE_MARKDOWN_LINES, f"{where}: {len(lines)} lines"
            wide = [ln for ln in lines if len(ln) > PROSE_WIDTH and not ln.startswith("|")
                    and not re.match(r"\s*\$", ln)]
            assert not wide, f"{where}: a line of {len(wide[0])} characters"
        else:
            assert len(lines) <= build.SLIDE_CODE_LINES, f"{where}: {len(lines)} lines"
        heading = cell["cell_type"] == "markdown" and lines and \
            re.match(r"#{1,2} ", lines[0])
        assert (kind == "slide") == bool(heading or k == 0), where


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_nbconvert_builds_the_deck_with_one_section_per_slide(path: Path) -> None:
    nbconvert = pytest.importorskip("nbconvert")
    body, _ = nbconvert.SlidesExporter().from_filename(str(path))
    assert "reveal" in body.lower()
    cells = _cells(path)
    slides = sum(1 for c in cells if c["metadata"]["slideshow"]["slide_type"] == "slide")
    subslides = len(cells) - slides
    # reveal.js: one <section> per slide, and one per subslide nested inside it
    assert body.count("<section") == slides + subslides + slides

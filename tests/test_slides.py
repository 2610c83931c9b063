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


# The offline kit: `build.py --slides DIR` links reveal.js, jQuery and RequireJS beside the
# decks, copied from the npm packages course/slides/package.json pins.

ASSET_LINK = re.compile(r'(?:src|href)="([^"]*(?:reveal|jquery|require)[^"]*)"', re.I)


def _fake_packages(root: Path) -> Path:
    """The files `build.SLIDE_ASSETS` copies, as empty stand-ins (no npm needed)."""
    for name in build.SLIDE_ASSETS:
        path = root / name
        if name.endswith(".js"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("// stand-in\n")
        else:
            (path / "sub").mkdir(parents=True)
            (path / "sub" / "file.js").write_text("// stand-in\n")
    return root


def _offline_links(deck: Path) -> list[str]:
    links = ASSET_LINK.findall(deck.read_text(encoding="utf-8"))
    assert links, f"{deck.name} links no reveal.js at all"
    online = [u for u in links if re.match(r"(https?:)?//", u)]
    assert not online, f"{deck.name} loads {online[0]} from the network"
    return links


def test_slides_link_reveal_js_beside_the_decks_not_a_cdn(tmp_path: Path) -> None:
    if build is None:
        pytest.skip("jupytext is not installed")
    pytest.importorskip("nbconvert")
    packages = _fake_packages(tmp_path / "node_modules")
    out = tmp_path / "slides"
    decks = build.build_slides(out, packages, stems={"00_tour", "07_dtr"})
    assert [d.name for d in decks] == ["00_tour.slides.html", "07_dtr.slides.html"]
    for deck in decks:
        _offline_links(deck)
    assert (out / "require.js").exists() and (out / "jquery.min.js").exists()
    assert (out / "reveal.js" / "dist" / "sub" / "file.js").exists()


def test_slides_without_the_packages_say_how_to_install_them(tmp_path: Path) -> None:
    if build is None:
        pytest.skip("jupytext is not installed")
    with pytest.raises(SystemExit, match="npm ci --prefix course/slides"):
        build.build_slides(tmp_path / "slides", tmp_path / "nothing", stems={"00_tour"})


def test_the_real_reveal_js_files_exist_where_the_decks_link_them(tmp_path: Path) -> None:
    """With the pinned packages installed (`npm ci --prefix course/slides`), every local
    file a deck links is there: the stylesheets, reveal.js, its notes plugin."""
    if build is None or not build.SLIDE_PACKAGES.exists():
        pytest.skip("run `npm ci --prefix course/slides` first")
    pytest.importorskip("nbconvert")
    out = tmp_path / "slides"
    (deck,) = build.build_slides(out, stems={"07_dtr"})
    text = deck.read_text(encoding="utf-8")
    links = _offline_links(deck) + re.findall(r'"(reveal\.js/[^"]+\.js)"', text)
    for link in links:
        assert (out / link.split("?")[0]).is_file(), f"{deck.name} links {link}: not there"

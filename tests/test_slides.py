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


# The offline kit: `build.py --slides DIR` links reveal.js, jQuery, RequireJS and MathJax
# beside the decks, copied from the npm packages course/slides/package.json pins, and leaves
# no web address in a deck.

ASSET_LINK = re.compile(r'(?:src|href)="([^"]*(?:reveal|jquery|require)[^"]*)"', re.I)
# An address on the network: http(s)://..., or a protocol-relative //host/... in a link,
# a CSS url() or an import.
NETWORK = re.compile(r"""https?://[^\s"'<>)]*|(?:src=|href=|url\(|from\s)\s*["']?//[^\s"'<>)]*""",
                     re.I)


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
    text = deck.read_text(encoding="utf-8")
    links = ASSET_LINK.findall(text)
    assert links, f"{deck.name} links no reveal.js at all"
    online = NETWORK.findall(text)
    assert not online, f"{deck.name} names {online[0]}: the network"
    return links


def test_the_offline_check_catches_a_cdn(tmp_path: Path) -> None:
    """nbconvert's own template, even with reveal.js, jQuery and RequireJS beside the deck
    (as the kit built it before), loads MathJax and mermaid from CDNs: the check must say
    so, as it must for a protocol-relative address."""
    nbconvert = pytest.importorskip("nbconvert")
    body, _ = nbconvert.SlidesExporter(reveal_url_prefix="reveal.js", jquery_url="jquery.min.js",
                                       require_js_url="require.js").from_filename(
        str(ROOT / "lessons" / "07_dtr.ipynb"))
    deck = tmp_path / "07_dtr.slides.html"
    deck.write_text(body, encoding="utf-8")
    with pytest.raises(AssertionError, match="the network"):
        _offline_links(deck)
    assert any("mathjax" in u for u in NETWORK.findall(body))
    for planted in ('<script src="//cdn.example.org/mathjax.js">',
                    "@import url(https://fonts.example.org/a.css);",
                    "import m from 'https://cdn.example.org/m.mjs';"):
        deck.write_text(body.split("<html", 1)[0] + '<link href="reveal.js/dist/reveal.css">'
                        + planted, encoding="utf-8")
        with pytest.raises(AssertionError, match="the network"):
            _offline_links(deck)


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
    assert (out / build.MATHJAX).exists()
    text = decks[1].read_text(encoding="utf-8")
    # MathJax 3 through reveal.js's math plugin, from beside the deck; no MathJax 2 left
    assert "RevealMath.MathJax3" in text and f'mathjax: "{build.MATHJAX}"' in text
    assert "MathJax.Hub" not in text and "x-mathjax-config" not in text


def test_no_lesson_needs_what_the_offline_decks_leave_out() -> None:
    """The offline template drops nbconvert's mermaid and widget scripts (both from CDNs):
    no lesson may draw with mermaid, and the notebooks carry no widget state."""
    for path in LESSONS:
        text = path.read_text(encoding="utf-8")
        assert "```mermaid" not in text, f"{path.name} draws with mermaid"
        assert "widgets" not in json.loads(text)["metadata"], f"{path.name} has widget state"


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
    links = _offline_links(deck) + re.findall(r'"((?:reveal\.js|mathjax)/[^"]+\.js)"', text)
    assert build.MATHJAX in links and "reveal.js/plugin/math/math.js" in links
    for link in links:
        assert (out / link.split("?")[0]).is_file(), f"{deck.name} links {link}: not there"
    assert (out / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").is_dir()


CHROMIUM = Path("/usr/bin/chromium")


@pytest.mark.browser
def test_the_math_renders_in_a_browser_without_network(tmp_path: Path) -> None:
    """Lesson 07's deck in headless Chromium (the system one; never downloaded) with every
    request that is not a local file refused: the page asks for nothing on the network,
    reveal.js starts, and MathJax turns the TeX into rendered math (mjx-container
    elements, no `$h_{DTR}$` left as text)."""
    if build is None or not build.SLIDE_PACKAGES.exists():
        pytest.skip("run `npm ci --prefix course/slides` first")
    pytest.importorskip("nbconvert")
    sync_api = pytest.importorskip("playwright.sync_api")
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    (deck,) = build.build_slides(tmp_path / "slides", stems={"07_dtr"})
    assert "$h_{DTR}$" in deck.read_text(encoding="utf-8")     # TeX in the deck
    asked, errors = [], []

    def route(r) -> None:
        if r.request.url.startswith("file://"):
            r.continue_()
        else:
            asked.append(r.request.url)
            r.abort()

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                    args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            page.route("**/*", route)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(deck.as_uri())
            page.wait_for_selector("mjx-container", state="attached", timeout=120_000)
            page.wait_for_function("window.Reveal && Reveal.isReady()", timeout=120_000)
            rendered = page.locator("mjx-container").count()
            raw = page.evaluate("document.querySelector('.slides').textContent")
        finally:
            browser.close()
    assert not asked, f"the deck asked the network for {asked[0]}"
    assert not errors, errors[0]
    assert rendered >= 1 and "$h_{DTR}$" not in raw

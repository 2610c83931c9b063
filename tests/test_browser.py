"""The tour in a real browser: JupyterLab + headless Chromium, as a student sees it.

Starts JupyterLab on 127.0.0.1 (a free port, no token) over a temporary copy of the
lessons, opens 00_tour.ipynb, runs all cells, and checks that the memory widget renders
(controls, headline, three plots, no "Error displaying widget"), then changes the planner
control in the page and waits for the headline's numbers to change. Then, for each zoo
model (one test each: `-k resnet50` runs one), a notebook with `memory_widget(dtr=True)`:
the model is chosen in the page's dropdown, and DTR must finish at the slider's default
budget, with the busy bar shown meanwhile and the headline wrapped, not cut. Screenshots
go to test-artifacts/; with MINIGRAPH_UPDATE_SCREENSHOTS=1 the widget's pictures are also
written to docs/ (tour-widget.png, the README's screenshot; widget-MODEL.png).

Uses the system Chromium (/usr/bin/chromium); never downloads a browser. Skips with the
reason when Chromium, Playwright or JupyterLab is missing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = os.environ.get("MINIGRAPH_CHROMIUM") or shutil.which("chromium") or \
    "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]

pytestmark = pytest.mark.browser
# Waits for the server, the kernel and the notebook's run: generous, as a busy machine is
# slow; they only stop a hang.
WAIT_S = 600
WAIT_MS = WAIT_S * 1000


def _requirements() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Python playwright is not installed (pip install playwright; no browser " \
               "download needed, the system Chromium is used)"
    try:
        import ipywidgets  # noqa: F401
        import jupyterlab  # noqa: F401
    except ImportError:
        return "JupyterLab or ipywidgets is not installed (pip install 'minigraph[lab]')"
    return None


LAB_ROOT: list[Path] = []         # the folder the module's JupyterLab serves


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory):
    """A JupyterLab server over a copy of lessons/; yields its base URL (its folder is
    `lab.root`, set on the function, so a test can add a notebook there)."""
    why = _requirements()
    if why:
        pytest.skip(why)
    tmp = tmp_path_factory.mktemp("lab")
    root = tmp / "lessons"
    shutil.copytree(ROOT / "lessons", root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get(
               "PYTHONPATH")])]),
           "MINIGRAPH_DEVICE": "cpu",
           "JUPYTER_CONFIG_DIR": str(tmp / "config"),
           "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"),
           "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings")}
    # Start a notebook's preferred kernel (Python 3) without asking: on a busy machine the
    # question came at no predictable time, and a Run All clicked before it ran nothing.
    tracker = tmp / "settings/@jupyterlab/notebook-extension/tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text(json.dumps({"autoStartDefaultKernel": True}))
    proc, url = None, ""
    LAB_ROOT[:] = [root]
    try:
        proc, url = _start_lab(root, env, tmp / "lab.log")
        yield url
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


def _start_lab(root: Path, env: dict, log_path: Path) -> tuple[subprocess.Popen, str]:
    """Start JupyterLab on a free port; return the process and its URL once it answers.

    A port free when chosen can be taken by another process before the server binds it
    (a race no choice of port avoids): the server then exits on "already in use", and
    only then is it started again on another port. (Its kernel keeps TCP ports: with
    `--KernelManager.transport=ipc` the tour's run in JupyterLab never finished, cause not
    found; the suite's other kernels use IPC, see tests/conftest.py.)"""
    for _ in range(5):
        port = _free_port()
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
                 "--ServerApp.ip=127.0.0.1", "--ServerApp.token=", "--ServerApp.password=",
                 f"--ServerApp.root_dir={root}", "--ServerApp.port_retries=0",
                 "--LabApp.news_url=None", "--LabApp.check_for_updates_class="
                 "jupyterlab.NeverCheckForUpdate",
                 *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else [])],
                cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + WAIT_S     # a busy machine starts it slowly
        while proc.poll() is None and time.time() < deadline:
            try:
                with urllib.request.urlopen(f"{url}/api/status", timeout=5) as r:
                    if r.status == 200:
                        return proc, url
            except OSError:
                pass
            time.sleep(0.5)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        text = log_path.read_text()
        if "already in use" not in text:
            pytest.fail("JupyterLab did not start:\n" + text[-3000:])
    pytest.fail("JupyterLab did not start: every port tried was taken:\n" + text[-3000:])


def _dismiss_notifications(page) -> None:
    """Close JupyterLab's toasts (the news question) so they do not cover the widget."""
    for button in page.locator(".jp-Notification-Toast-Close, .Toastify__close-button").all():
        try:
            button.click(timeout=1000)
        except Exception:
            pass


def test_tour_widget_renders_and_reacts_in_jupyterlab(lab: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 2400})
        page.set_default_timeout(WAIT_MS)      # no wait shorter than a busy machine needs
        expect.set_options(timeout=WAIT_MS)
        try:
            _run_all(page, f"{lab}/lab/tree/00_tour.ipynb?reset")

            headline = page.locator(".mg-headline").first
            expect(headline).to_contain_text("peak", timeout=WAIT_MS)
            expect(headline).to_contain_text("theoretical minimum")
            # The last cell (the exercises' check) has printed: everything ran.
            expect(page.get_by_text("not done yet").first).to_be_visible(timeout=WAIT_MS)
            expect(page.locator(".jp-NotebookPanel .jp-Notebook-ExecutionIndicator")
                   .first).to_have_attribute("data-status", "idle", timeout=WAIT_MS)

            widget = page.locator(".mg-memory-widget").first
            widget.scroll_into_view_if_needed()
            for control in ("model", "order", "planner", "inplace", "colors", "alignment",
                            "color_by", "dtr", "dtr_budget"):
                expect(widget.locator(f".mg-control-{control}")).to_be_visible()
            for plot in ("timeline", "layout", "comparison"):
                img = widget.locator(f"img.mg-plot-{plot}")
                expect(img).to_be_visible()
                assert img.evaluate("e => e.naturalWidth") > 100, f"{plot} image is empty"
            assert page.get_by_text("Error displaying widget").count() == 0
            assert page.locator(".jp-OutputArea-output[data-mime-type="
                                "'application/vnd.jupyter.stderr'] >> text=Traceback"
                                ).count() == 0

            # Move the planner control in the page: the headline's numbers must change.
            before = headline.inner_text()
            widget.locator(".mg-control-planner select").select_option("none")
            widget.locator(".mg-control-inplace select").select_option(label="off")
            expect(headline).not_to_have_text(before, timeout=WAIT_MS)
            expect(headline).to_contain_text("saved 0.0%", timeout=WAIT_MS)
            after = headline.inner_text()
            assert after != before, (before, after)

            _dismiss_notifications(page)
            page.wait_for_timeout(500)         # let the browser paint the new images
            page.screenshot(path=str(ARTIFACTS / "tour-page.png"), full_page=False)
            widget.screenshot(path=str(ARTIFACTS / "tour-widget.png"))
            # Back to a plan that saves memory, for the README's picture.
            widget.locator(".mg-control-planner select").select_option("ge")
            widget.locator(".mg-control-inplace select").select_option(label="last reader")
            expect(headline).not_to_contain_text("saved 0.0%", timeout=WAIT_MS)
            page.wait_for_timeout(500)
            if os.environ.get("MINIGRAPH_UPDATE_SCREENSHOTS"):
                widget.screenshot(path=str(ROOT / "docs" / "tour-widget.png"))
        except Exception:
            page.screenshot(path=str(ARTIFACTS / "tour-failure.png"), full_page=True)
            raise
        finally:
            browser.close()



def _notebook(path: Path, source: str) -> None:
    """A one-cell notebook (nbformat 4) at `path`."""
    cell = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
            "source": source.splitlines(keepends=True)}
    path.write_text(json.dumps({
        "cells": [cell], "nbformat": 4, "nbformat_minor": 4,
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                    "name": "python3"}}}))


def _run_all(page, url: str) -> None:
    """Open a notebook and Run > Run All Cells as a student would. On a busy machine the
    notebook can come up with no kernel (JupyterLab once shut the first one down a second
    after starting it), or JupyterLab can ask which kernel to start at any moment, and a
    Run All clicked then runs nothing. So, until a code cell has started ("[*]" or "[n]"):
    answer the question when it is up (Python 3), ask for a kernel when there is none,
    and click Run All when the kernel is idle and no click is pending (a minute)."""
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=WAIT_MS)
    started = page.locator(".jp-CodeCell .jp-InputPrompt", has_text=re.compile(r"\[(\*|\d+)\]"))
    question = page.locator(".jp-Dialog", has_text="Select Kernel").first
    kernel = page.locator(".jp-NotebookPanel .jp-Toolbar-kernelName").first
    indicator = page.locator(".jp-NotebookPanel .jp-Notebook-ExecutionIndicator").first
    deadline, clicked = time.monotonic() + WAIT_S, None
    while started.count() == 0:
        if time.monotonic() > deadline:
            pytest.fail(f"no cell of {url} started in {WAIT_S} s")
        if question.is_visible():
            question.locator("button", has_text="Select").last.click()
            question.wait_for(state="hidden", timeout=WAIT_MS)
        elif "No Kernel" in (kernel.text_content() or ""):
            kernel.click()                          # JupyterLab asks which one
        elif indicator.get_attribute("data-status") == "idle" and (
                clicked is None or time.monotonic() - clicked > RECLICK_S):
            page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
            page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
            clicked = time.monotonic()
        page.wait_for_timeout(1000)     # a pause between looks, not a limit


RECLICK_S = 60  # Run All again when nothing started this long after it and no question is up


def _shut_down_kernels(page, name: str) -> None:
    """Stop the kernels of notebook `name` (each test starts one; they would pile up)."""
    try:
        page.evaluate("""async (name) => {
            const m = document.cookie.match(/_xsrf=([^;]+)/);
            const headers = {'X-XSRFToken': m ? decodeURIComponent(m[1]) : ''};
            const sessions = await (await fetch('/api/sessions')).json();
            for (const s of sessions)
                if (s.path.endsWith(name))
                    await fetch('/api/sessions/' + s.id, {method: 'DELETE', headers});
        }""", name)
    except Exception:
        pass


ZOO = ("mlp", "cnn", "resnet", "resnet50", "transformer", "lstm", "unet", "densenet")


@contextmanager
def _widget_page(lab: str, name: str, source: str, height: int, failure: str):
    """A notebook `name` holding `source`, opened and run in JupyterLab in a headless
    Chromium: yields the page and the first memory widget; on a failure the whole page
    is saved as `failure`; the kernel is shut down and the browser closed either way."""
    from playwright.sync_api import expect, sync_playwright

    _notebook(LAB_ROOT[0] / name, source)
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": height})
        page.set_default_timeout(WAIT_MS)
        expect.set_options(timeout=WAIT_MS)
        try:
            _run_all(page, f"{lab}/lab/tree/{name}?reset")
            yield page, page.locator(".mg-memory-widget").first
        except Exception:
            page.screenshot(path=str(ARTIFACTS / failure), full_page=True)
            raise
        finally:
            _shut_down_kernels(page, name)
            browser.close()


@pytest.mark.parametrize("model", ZOO)
def test_widget_with_dtr_finishes_on_every_zoo_model_at_its_default_budget(
        lab: str, model: str) -> None:
    """DTR on, the model chosen in the page: the run at the slider's default budget
    finishes (no "thrashed", no "below smallest budget"), the busy bar showed meanwhile,
    and the headline wraps inside the widget rather than being cut."""
    from playwright.sync_api import expect

    from minigraph.models import MODELS
    assert set(ZOO) == set(MODELS), "the zoo changed: update ZOO"
    with _widget_page(lab, f"widget_{model}.ipynb",
                      "import minigraph as mg\nw = mg.memory_widget('mlp', dtr=True)\nw",
                      2600, f"widget-{model}-failure.png") as (page, widget):
        caption = widget.locator(".mg-caption")
        expect(caption).to_contain_text("mlp, batch 8:", timeout=WAIT_MS)
        if model != "mlp":
            # Watch the busy class from now on: it must show while the model changes.
            widget.evaluate("""el => { window.mgBusySeen = false;
                new MutationObserver(() => { if (el.classList.contains('mg-busy'))
                    window.mgBusySeen = true; })
                .observe(el, {attributes: true, attributeFilter: ['class']}); }""")
            widget.locator(".mg-control-model select").select_option(model)
            expect(caption).to_contain_text(f"{model}, batch 8:", timeout=WAIT_MS)
            expect(widget).not_to_have_class(re.compile("mg-busy"), timeout=WAIT_MS)
            assert page.evaluate("window.mgBusySeen"), "no busy bar while switching"
        headline = widget.locator(".mg-headline")
        expect(headline).to_contain_text("DTR at")
        text = headline.inner_text()
        assert "compute x" in text, text
        assert "thrashed" not in text and "below smallest budget" not in text, text
        assert widget.locator(".mg-message").inner_text().strip() == ""
        assert page.get_by_text("Error displaying widget").count() == 0
        for plot in ("timeline", "layout", "comparison", "dtr"):
            img = widget.locator(f"img.mg-plot-{plot}")
            expect(img).to_be_visible()
            assert img.evaluate("e => e.naturalWidth") > 100, f"{plot} image is empty"
        # The headline wraps: nothing hidden to the right, inside the widget's width.
        box = headline.evaluate("""e => { const r = e.getBoundingClientRect();
            const c = e.closest('.mg-memory-widget').getBoundingClientRect();
            return {sw: e.scrollWidth, cw: e.clientWidth, right: r.right,
                    limit: c.right}; }""")
        assert box["sw"] <= box["cw"] + 1 and box["right"] <= box["limit"] + 1, box
        widget.scroll_into_view_if_needed()
        page.wait_for_timeout(500)         # let the browser paint the new images
        widget.screenshot(path=str(ARTIFACTS / f"widget-{model}.png"))
        if os.environ.get("MINIGRAPH_UPDATE_SCREENSHOTS"):
            widget.screenshot(path=str(ROOT / "docs" / f"widget-{model}.png"))


def test_widget_names_its_techniques_explains_a_dead_toggle_and_fits_its_cell(
        lab: str) -> None:
    """Issue 51: the headline says which techniques are on; switching in-place off on a
    model where it saves nothing says why, in the page; and at a narrow window the widget
    stays inside its output area (the left edge was clipped), nothing scrolled sideways."""
    from playwright.sync_api import expect

    with _widget_page(lab, "widget_first_hour.ipynb",
                      "import minigraph as mg\n"
                      "w = mg.memory_widget('mlp', batch=1, planner='ge')\nw",
                      2400, "widget-first-hour-failure.png") as (page, widget):
        headline = widget.locator(".mg-headline")
        expect(headline).to_contain_text("on: ge, in-place (last reader), order program",
                                         timeout=WAIT_MS)
        expect(headline).to_contain_text("in-place saves nothing on this model")
        widget.locator(".mg-control-inplace select").select_option(label="off")
        expect(headline).to_contain_text("on: ge, order program", timeout=WAIT_MS)
        expect(headline).to_contain_text("in-place would save nothing on this model")
        for width in (1300, 620):
            page.set_viewport_size({"width": width, "height": 2400})
            page.wait_for_timeout(1000)            # let JupyterLab lay the cell out
            box = widget.evaluate("""e => { const r = e.getBoundingClientRect();
                const a = e.closest('.jp-OutputArea-output').getBoundingClientRect();
                return {left: r.left, right: r.right, aleft: a.left, aright: a.right,
                        sw: e.scrollWidth, cw: e.clientWidth}; }""")
            assert box["left"] >= box["aleft"] - 1 and box["right"] <= box["aright"] + 1, \
                (width, box)
            assert box["sw"] <= box["cw"] + 1, (width, box)
        widget.screenshot(path=str(ARTIFACTS / "widget-narrow.png"))


def test_minigraph_lab_on_sigterm_leaves_no_jupyter_process(tmp_path) -> None:
    """Issue 51, with the real JupyterLab (no browser needed): `minigraph lab` passes
    JupyterLab's own options through (`--no-browser --port P ...`), a kernel is started in
    it, and SIGTERM to `minigraph lab` ends JupyterLab and the kernel and frees the port."""
    pytest.importorskip("jupyterlab")
    from minigraph.cli import descendants
    nb = tmp_path / "n.ipynb"
    _notebook(nb, "1 + 1")
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get(
               "PYTHONPATH")])]),
           "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
           "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings")}
    port = _free_port()
    with open(tmp_path / "lab.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "minigraph", "lab", str(nb), "--no-browser", "--port",
             str(port), "--ip", "127.0.0.1", "--ServerApp.token=", "--ServerApp.password=",
             "--ServerApp.disable_check_xsrf=True", "--ServerApp.port_retries=0",
             f"--ServerApp.root_dir={tmp_path}", "--LabApp.news_url=None"],
            env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + WAIT_S
        while True:
            assert proc.poll() is None, (tmp_path / "lab.log").read_text()[-3000:]
            assert time.time() < deadline, "JupyterLab did not answer"
            try:
                with urllib.request.urlopen(f"{url}/api/status", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        req = urllib.request.Request(f"{url}/api/kernels", data=b'{"name": "python3"}',
                                     headers={"Content-Type": "application/json"},
                                     method="POST")
        with urllib.request.urlopen(req, timeout=WAIT_S) as r:
            assert r.status in (200, 201)
        below = descendants(proc.pid)
        assert len(below) >= 2, below           # JupyterLab and its kernel (at least)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 128 + signal.SIGTERM
        deadline = time.time() + 30
        while [p for p in below if _alive(p)]:
            assert time.time() < deadline, [p for p in below if _alive(p)]
            time.sleep(0.2)
        with socket.socket() as s:              # nothing listens on the port any more
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)    # TIME_WAIT is fine
            s.bind(("127.0.0.1", port))
    finally:
        if proc.poll() is None:
            proc.kill()


def _alive(pid: int) -> bool:
    """A process `pid` that is not a zombie (dead, waiting to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"

"""The instructor's kit works as shipped: nbgrader finds its exchange from the course
folder alone (course/nbgrader_config.py), the students' repository (course/student_repo.py)
leaves out the instructor's guide, the rubrics and the solutions, and every written "why"
prompt of the lessons and assignments has its rubric in course/rubrics.md."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COURSE = ROOT / "course"


def _nbgrader(course: Path, config_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(config_dir),
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    return subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env,
                          capture_output=True, text=True, timeout=300)


def _course(tmp: Path) -> Path:
    """A course folder with the shipped config and one one-cell assignment, t1, released
    (as `generate_assignment` leaves it; the test runs only the exchange's step)."""
    course = tmp / "course"
    (course / "release" / "t1").mkdir(parents=True)
    for name in ("nbgrader_config.py", "sandboxed_score.py"):   # the config imports its step
        shutil.copyfile(COURSE / name, course / name)
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "id": "c0",
                     "metadata": {}, "outputs": [], "source": ["x = 1"]}],
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                      "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    (course / "release" / "t1" / "t1.ipynb").write_text(json.dumps(nb))
    return course


def test_the_shipped_config_gives_the_course_its_own_exchange(tmp_path: Path) -> None:
    pytest.importorskip("nbgrader")
    course = _course(tmp_path)
    empty = tmp_path / "jupyter"          # no global nbgrader_config.py anywhere
    empty.mkdir()
    run = _nbgrader(course, empty, "release_assignment", "t1")
    assert run.returncode == 0, run.stdout + run.stderr
    assert (course / "exchange" / "minigraph" / "outbound" / "t1" / "t1.ipynb").is_file()


def test_a_global_exchange_stands(tmp_path: Path) -> None:
    """A JupyterHub's global config names the exchange its students share: it wins."""
    pytest.importorskip("nbgrader")
    course = _course(tmp_path)
    hub, shared = tmp_path / "jupyter", tmp_path / "srv-exchange"
    hub.mkdir()
    shared.mkdir()
    (hub / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.Exchange.root = {str(shared)!r}\n")
    run = _nbgrader(course, hub, "release_assignment", "t1")
    assert run.returncode == 0, run.stdout + run.stderr
    assert (shared / "minigraph" / "outbound" / "t1" / "t1.ipynb").is_file()
    assert not (course / "exchange").exists()


def _student_repo():
    spec = importlib.util.spec_from_file_location("_course_student_repo",
                                                  COURSE / "student_repo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_students_repository_leaves_out_the_instructors_kit() -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    files = set(_student_repo().student_files())
    assert "lessons/00_tour.ipynb" in files and "README.md" in files
    kept = [f for f in files if f == "docs/teaching.md" or f.startswith(
        ("course/", "lessons/assignments/solutions/")) or "rubric" in f.lower()]
    assert not kept, f"the students' repository would hold {sorted(kept)[0]}"
    # what is left out exists here: the test would see it if it were copied
    assert (ROOT / "docs" / "teaching.md").is_file()
    assert (COURSE / "rubrics.md").is_file()
    assert any((ROOT / "lessons" / "assignments" / "solutions").glob("*.py"))


# Written prompts: the sentences of an Exercises section (lessons) or of an assignment
# whose answer is words: a question with "why", "say why", or "explain".
WRITTEN = re.compile(r"\bsay why\b|\bexplain\b|\bwhy\b[^.?!]*\?", re.I)
RUBRICS = COURSE / "rubrics.md"


def _markdown(source: Path) -> list[str]:
    """The markdown cells of a jupytext percent source, each as one line of prose."""
    cells = []
    for cell in re.split(r"^# %%.*$", source.read_text(encoding="utf-8"), flags=re.M):
        lines = [ln for ln in cell.splitlines() if ln.strip()]
        if lines and all(ln.startswith("#") for ln in lines):
            cells.append(" ".join(ln.lstrip("#").strip() for ln in lines))
    return cells


def written_prompts() -> list[tuple[str, str]]:
    """(source name, sentence) for every written prompt of the lessons and assignments."""
    found = []
    lessons = sorted((ROOT / "lessons" / "src").glob("[0-9]*.py"))
    assignments = sorted((ROOT / "lessons" / "assignments" / "src").glob("A*.py"))
    for source in lessons + assignments:
        cells, exercises = _markdown(source), source in assignments
        for cell in cells:
            if cell.startswith("## "):
                exercises = source in assignments or cell.startswith("## Exercises")
            if not exercises:
                continue
            for sentence in re.split(r"(?<=[.?!])\s+(?=[A-Z*(`])", cell):
                match = WRITTEN.search(sentence)
                if match:
                    found.append((source.name, sentence))
    return found


def test_written_prompts_are_found() -> None:
    names = {name for name, _ in written_prompts()}
    assert {"04_coloring.py", "09_online_allocators.py"} <= names


def test_every_written_prompt_has_a_rubric() -> None:
    rubrics = RUBRICS.read_text(encoding="utf-8")
    quoted = re.findall(r'^> "(.+)"$', rubrics, re.M)
    for name, sentence in written_prompts():
        head = f"## {name[:3].rstrip('_')} "
        assert head in rubrics, f"{RUBRICS.name} has no section for {name}"
        section = rubrics.split(head, 1)[1].split("\n## ", 1)[0]
        hits = [q for q in quoted if q in sentence and f'> "{q}"' in section]
        assert hits, f"{name}: no rubric quotes {sentence!r}"
        for part in ("**Full credit.**", "**Partial credit.**", "**No credit.**"):
            entry = section.split(f'> "{hits[0]}"', 1)[1].split("\n### ", 1)[0]
            assert part in entry, f"{name}: the rubric of {hits[0]!r} lacks {part}"

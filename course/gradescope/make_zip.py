"""Zip the Gradescope autograder of an assignment: what you upload as its "Autograder".

    python course/gradescope/make_zip.py a1 [a2 a3] [--private DIR] [--out FOLDER]

Writes FOLDER/aN.zip (default: course/gradescope/) holding, at its root, `setup.sh` (this
folder's), `run_autograder` (aN/'s), `autograder.py`, and `repo/`: minigraph's package,
pyproject.toml, README.md and the reference solutions (lessons/assignments/solutions/: the
oracle of A1 and the target of A3 on private cases; Gradescope never shows the autograder's
files to students). `--private DIR` adds your private cases as `private/` (a `seed` file
works there too). tests/test_gradescope.py runs each zip's `run_autograder` in a folder laid
out as Gradescope lays out /autograder.
"""

from __future__ import annotations

import argparse
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]                  # the repository
ASSIGNMENTS = ("a1", "a2", "a3")
#: what repo/ holds, relative to the repository
REPO = ("pyproject.toml", "README.md", "minigraph", "lessons/assignments/solutions")


def repo_files(root: Path = ROOT) -> list[Path]:
    """The files of REPO under `root`, caches left out."""
    out = []
    for name in REPO:
        path = root / name
        found = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        out += [p for p in found if "__pycache__" not in p.parts and p.suffix != ".pyc"]
    return out


def _add(z: zipfile.ZipFile, src: Path, name: str) -> None:
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    mode = 0o755 if src.stat().st_mode & 0o100 else 0o644
    info.external_attr = (0o100000 | mode) << 16           # a regular file with its mode
    info.compress_type = zipfile.ZIP_DEFLATED
    z.writestr(info, src.read_bytes())


def make_zip(assignment: str, out: Path, private: Path | None = None) -> Path:
    """Write out/<assignment>.zip and return its path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{assignment}.zip"
    with zipfile.ZipFile(path, "w") as z:
        _add(z, HERE / "setup.sh", "setup.sh")
        _add(z, HERE / assignment / "run_autograder", "run_autograder")
        _add(z, HERE / "autograder.py", "autograder.py")
        for f in repo_files():
            _add(z, f, "repo/" + f.relative_to(ROOT).as_posix())
        if private is not None:
            for f in sorted(p for p in private.rglob("*") if p.is_file()):
                _add(z, f, "private/" + f.relative_to(private).as_posix())
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("assignments", nargs="+", choices=ASSIGNMENTS)
    ap.add_argument("--private", type=Path, help="a folder of private cases to include")
    ap.add_argument("--out", type=Path, default=HERE, help="where the zips go")
    args = ap.parse_args(argv)
    if args.private is not None and not args.private.is_dir():
        ap.error(f"--private {args.private}: no such folder")
    for a in args.assignments:
        path = make_zip(a, args.out, args.private)
        print(f"wrote {path} ({path.stat().st_size // 1024} KiB): upload it as {a}'s autograder")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Compare two benchmarks/RESULTS.md files with their timings blanked.

    python benchmarks/diff_results.py OLD.md NEW.md

Table columns whose header names a time (ms, time, exponent, ...) become `~`, and so do
durations written in prose ("12.3 s"); the command lines are dropped (they carry dates). What
is left must be identical when a change "changes no number". Exit 1 if anything differs.
"""

from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path

TIME_COLUMN = re.compile(r"\(ms\)|ms/step|time|^\s*[\d,]+\s*$|exponent|ratio at|seconds|/ torch"
                         r"|peak ratio")
SEPARATOR = re.compile(r"^\|[\s:|-]+\|$")


def without_timings(text: str) -> list[str]:
    """The lines of a RESULTS.md with every timing replaced by `~`."""
    lines, out, blank = text.splitlines(), [], set()
    for i, line in enumerate(lines):
        if line.startswith("`python"):
            continue
        if line.startswith("|") and i + 1 < len(lines) and SEPARATOR.match(lines[i + 1].strip()):
            cols = [c.strip() for c in line.strip("|").split("|")]
            blank = {k for k, c in enumerate(cols) if TIME_COLUMN.search(c)}
        elif line.startswith("|") and blank:
            cols = line.strip().strip("|").split("|")
            line = "|" + "|".join("~" if k in blank else c for k, c in enumerate(cols)) + "|"
        elif not line.startswith("|"):
            blank = set()
        out.append(re.sub(r"\d+(\.\d+)? ?(s|ms)\b", "~s", line))
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    old, new = (without_timings(Path(p).read_text()) for p in argv)
    diff = list(difflib.unified_diff(old, new, argv[0], argv[1], lineterm="", n=0))
    print("\n".join(diff) if diff else "identical apart from timings")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

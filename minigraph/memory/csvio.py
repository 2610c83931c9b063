"""Buffer problems and plans as CSV files, to trade them with other planners.

A problem is one row per buffer, `id,lower,upper,size`, with the lifetime half-open:
alive at steps lower .. upper-1 (the DSA benchmark convention), so
`Buffer.end = upper - 1`. A plan adds an `offset` column. Ids that are all digits are
read as integers. Every mistake raises `CSVError`, naming the file, the line and the rule.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import IO

from ..errors import PlanError
from .buffers import Buffer, first_overlap

PROBLEM_COLUMNS = ("id", "lower", "upper", "size")
PLAN_COLUMNS = PROBLEM_COLUMNS + ("offset",)


class CSVError(PlanError):
    """A buffer or plan CSV breaks a rule; `line` is the 1-based line at fault (the
    header is line 1)."""

    def __init__(self, message: str, source: str = "<csv>", line: int | None = None):
        where = f"{source}, line {line}" if line is not None else source
        super().__init__(f"{where}: {message}")
        self.source, self.line = source, line


def _open(src: str | os.PathLike | IO[str]) -> tuple[IO[str], str, bool]:
    if hasattr(src, "read"):
        return src, getattr(src, "name", "<csv>"), False
    return open(src, newline=""), os.fspath(src), True


def _int(text: str, column: str, source: str, line: int) -> int:
    try:
        return int(text.strip())
    except (ValueError, AttributeError):
        raise CSVError(f"{column} {text!r} is not an integer", source, line) from None


def _rows(src, columns: Sequence[str]) -> tuple[list[tuple[int, dict[str, str]]], str]:
    f, source, close = _open(src)
    try:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            raise CSVError(f"empty file; expected the header {','.join(columns)}", source, 1)
        names = [h.strip().lower() for h in header]
        missing = [c for c in columns if c not in names]
        if missing:
            raise CSVError(f"missing column {', '.join(missing)} (header is "
                           f"{','.join(header)}; expected {','.join(columns)})", source, 1)
        col = {c: names.index(c) for c in columns}
        rows = []
        for row in reader:
            line = reader.line_num
            if not row or all(not x.strip() for x in row):
                continue
            if len(row) < len(names):
                raise CSVError(f"{len(row)} fields, the header has {len(names)}", source, line)
            rows.append((line, {c: row[k] for c, k in col.items()}))
        return rows, source
    finally:
        if close:
            f.close()


def _buffers(rows, source: str) -> tuple[list[Buffer], dict[Hashable, int]]:
    raw_ids = [r["id"].strip() for _, r in rows]
    numeric = bool(raw_ids) and all(i.isdigit() for i in raw_ids)
    out, line_of = [], {}
    for (line, r), raw in zip(rows, raw_ids):
        if not raw:
            raise CSVError("empty id", source, line)
        bid: Hashable = int(raw) if numeric else raw
        lower = _int(r["lower"], "lower", source, line)
        upper = _int(r["upper"], "upper", source, line)
        size = _int(r["size"], "size", source, line)
        if size < 0:
            raise CSVError(f"buffer {bid}: negative size {size}", source, line)
        if upper <= lower:
            raise CSVError(f"buffer {bid}: upper {upper} <= lower {lower} (lifetimes are "
                           "half-open [lower, upper) and must hold a step)", source, line)
        if bid in line_of:
            raise CSVError(f"duplicate id {bid} (first on line {line_of[bid]})", source, line)
        line_of[bid] = line
        out.append(Buffer(bid, lower, upper - 1, size))
    return out, line_of


def read_problem(src: str | os.PathLike | IO[str]) -> list[Buffer]:
    """Buffers from a CSV with columns id,lower,upper,size (extra columns are ignored)."""
    rows, source = _rows(src, PROBLEM_COLUMNS)
    return _buffers(rows, source)[0]


def read_plan(src: str | os.PathLike | IO[str], check: bool = True
              ) -> tuple[list[Buffer], dict[Hashable, int]]:
    """Buffers and offsets from a CSV with columns id,lower,upper,size,offset.

    With `check` (the default) the plan is validated: offsets are non-negative and no
    two buffers alive at a common step share a byte (`buffers.first_overlap`, the
    validator's own sweep); a CSVError names both lines.
    """
    rows, source = _rows(src, PLAN_COLUMNS)
    buffers, line_of = _buffers(rows, source)
    offsets = {}
    for (line, r), b in zip(rows, buffers):
        off = _int(r["offset"], "offset", source, line)
        if off < 0:
            raise CSVError(f"buffer {b.id}: negative offset {off}", source, line)
        offsets[b.id] = off
    if check:
        pair = first_overlap(buffers, offsets)
        if pair is not None:
            a, b = pair
            oa, ob = offsets[a.id], offsets[b.id]
            raise CSVError(
                f"buffers {a.id} (line {line_of[a.id]}) and {b.id} (line {line_of[b.id]}) "
                f"are both alive at step {max(a.start, b.start)} and overlap: bytes "
                f"[{oa},{oa + a.size}) and [{ob},{ob + b.size})", source, line_of[b.id])
    return buffers, offsets


def _write(dst, header: Sequence[str], rows: Iterable[Sequence]) -> None:
    f, _, close = (dst, "", False) if hasattr(dst, "write") else \
        (open(dst, "w", newline=""), "", True)
    try:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
    finally:
        if close:
            f.close()


def write_problem(dst: str | os.PathLike | IO[str], buffers: Iterable[Buffer]) -> None:
    """Write buffers as id,lower,upper,size (upper = end + 1)."""
    _write(dst, PROBLEM_COLUMNS, ((b.id, b.start, b.end + 1, b.size) for b in buffers))


def write_plan(dst: str | os.PathLike | IO[str], buffers: Iterable[Buffer],
               offsets: Mapping[Hashable, int]) -> None:
    """Write buffers and their offsets as id,lower,upper,size,offset."""
    _write(dst, PLAN_COLUMNS, ((b.id, b.start, b.end + 1, b.size, offsets[b.id])
                               for b in buffers))


def problem_text(buffers: Iterable[Buffer]) -> str:
    """The CSV of a problem as a string (for tests and notebooks)."""
    f = io.StringIO()
    write_problem(f, buffers)
    return f.getvalue()

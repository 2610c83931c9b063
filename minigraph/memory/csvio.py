"""Buffer problems and plans as CSV files, to trade them with other planners.

A problem is one row per buffer, `id,lower,upper,size`, with the lifetime half-open:
alive at steps lower .. upper-1 (the DSA benchmark convention), so
`Buffer.end = upper - 1`. A plan adds an `offset` column. Files are UTF-8 (a byte order
mark is allowed); numbers are ASCII decimal integers; ids that are all ASCII digits are read
as integers. Every mistake (a binary or Latin-1 file, a bad header, a row of the wrong width,
a field over the csv module's limit, ...) raises `CSVError`, naming the file, the line and
the rule.
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import IO

from ..errors import PlanError
from ..files import atomic_open
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


def _text(src: str | os.PathLike | IO) -> tuple[str, str]:
    """The whole file as text and its name for messages. Files are read as UTF-8 (a byte
    order mark is dropped, as spreadsheets write one); anything else is refused with the
    line of the first bad byte rather than guessed at."""
    if hasattr(src, "read"):
        source = str(getattr(src, "name", "<csv>"))
        try:
            data = src.read()
        except (OSError, UnicodeDecodeError) as e:    # a text stream in the wrong encoding
            raise CSVError(f"cannot read: {e}", source) from None
    else:
        source = os.fspath(src)
        try:
            with open(src, "rb") as f:
                data = f.read()
        except OSError as e:
            raise CSVError(f"cannot read the file: {e.strerror or e}", source) from None
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as e:
            line = data.count(b"\n", 0, e.start) + 1
            raise CSVError(f"byte 0x{data[e.start]:02x} is not UTF-8 text (a binary file, or "
                           "saved as Latin-1? save it as UTF-8)", source, line) from None
    if not isinstance(data, str):
        raise CSVError(f"read() gave {type(data).__name__}, not text", source)
    data = data.removeprefix("\ufeff")
    nul = data.find("\0")
    if nul >= 0:
        raise CSVError("NUL byte: a binary file, not CSV text", source,
                       data.count("\n", 0, nul) + 1)
    return data, source


_INTEGER = re.compile(r"[+-]?[0-9]+")
_LIMIT = 2**63        # planners do arithmetic in int64 (NumPy, HiGHS)


def _int(text: str, column: str, source: str, line: int) -> int:
    """An ASCII decimal integer. int() would also take Arabic-Indic or full-width digits and
    underscores ("1_000"); a plan file must mean the same to every reader, so those are
    refused."""
    t = text.strip()
    if not (t.isascii() and t.isdigit()) and not _INTEGER.fullmatch(t):    # fast path first
        raise CSVError(f"{column} {_short(repr(text))} is not an integer (ASCII digits 0-9)",
                       source, line)
    if len(t.lstrip("+-")) > 19 or abs(int(t)) >= _LIMIT:    # int() refuses 4300+ digits
        raise CSVError(f"{column} {_short(t)} does not fit in 64 bits", source, line)
    return int(t)


def _short(text: str, width: int = 60) -> str:
    """`text` cut to `width` characters for a message (a field may be megabytes long)."""
    return text if len(text) <= width else f"{text[:width]}... ({len(text)} characters)"


def _header(header: list[str] | None, columns: Sequence[str], source: str) -> dict[str, int]:
    """Column name -> index, from the header line (line 1)."""
    if header is None:
        raise CSVError(f"empty file; expected the header {','.join(columns)}", source, 1)
    names = [h.strip().lower() for h in header]
    missing = [c for c in columns if c not in names]
    if missing:
        raise CSVError(f"missing column {', '.join(missing)} (header is "
                       f"{_short(','.join(header))}; expected {','.join(columns)})", source, 1)
    twice = [c for c in columns if names.count(c) > 1]
    if twice:
        raise CSVError(f"column {', '.join(twice)} appears twice in the header", source, 1)
    return {c: names.index(c) for c in columns}


def _rows(src, columns: Sequence[str]) -> tuple[list[tuple[int, dict[str, str]]], str]:
    """(line, column -> field) of every non-blank row; each row has the header's width."""
    data, source = _text(src)
    reader = csv.reader(io.StringIO(data, newline=""))
    rows: list[tuple[int, dict[str, str]]] = []
    try:
        header = next(reader, None)
        col = _header(header, columns, source)
        ended = reader.line_num
        for row in reader:
            line, begun, ended = reader.line_num, ended + 1, reader.line_num
            if not row or all(not x.strip() for x in row):
                continue
            if len(row) != len(header):
                if line > begun and any("\n" in x or "\r" in x for x in row):
                    raise CSVError(f"a quote opened on line {begun} is never closed (lines "
                                   f"{begun}-{line} were read as one row)", source, begun)
                raise CSVError(f"{len(row)} fields, the header has {len(header)}", source, line)
            rows.append((line, {c: row[k] for c, k in col.items()}))
    except csv.Error as e:      # a field over csv.field_size_limit(), a stray quote
        raise CSVError(f"not valid CSV: {e}", source, reader.line_num) from None
    return rows, source


def _buffers(rows, source: str) -> tuple[list[Buffer], dict[Hashable, int]]:
    raw_ids = [r["id"].strip() for _, r in rows]
    numeric = bool(raw_ids) and all(i.isascii() and i.isdigit() for i in raw_ids)
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
    """The header and rows to a stream, or to a path atomically (`files.atomic_open`: a
    write cut short leaves the old file, never part of a plan)."""
    if hasattr(dst, "write"):
        _rows_to(dst, header, rows)
        return
    with atomic_open(dst, "w", newline="") as f:
        _rows_to(f, header, rows)


def _rows_to(f: IO[str], header: Sequence[str], rows: Iterable[Sequence]) -> None:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)


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

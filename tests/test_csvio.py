"""Buffer problems and plans as CSV (half-open [lower, upper)), and `minigraph plan`."""

from __future__ import annotations

import argparse
import csv
import io

import pytest

from minigraph.errors import MinigraphError, PlanError
from minigraph.experiments.plan_cli import add_arguments, run
from minigraph.memory.buffers import Buffer, first_overlap, validate_offsets
from minigraph.memory.csvio import (
    CSVError,
    problem_text,
    read_plan,
    read_problem,
    write_plan,
    write_problem,
)
from minigraph.memory.instances import ge_worked_example, hard_instance
from minigraph.memory.planners import plan_buffers


def text(s: str) -> io.StringIO:
    return io.StringIO(s)


def test_problem_round_trip_keeps_every_buffer():
    for bufs in (ge_worked_example(), hard_instance(40, 4096, 30, seed=1),
                 [Buffer(k, k, k + 3, 16 * k) for k in range(5)]):
        assert read_problem(text(problem_text(bufs))) == bufs


def test_lifetimes_are_half_open_in_the_file():
    bufs = read_problem(text("id,lower,upper,size\nx,3,5,100\n"))
    assert bufs == [Buffer("x", 3, 4, 100)]             # alive at steps 3 and 4
    assert problem_text(bufs) == "id,lower,upper,size\nx,3,5,100\n"


def test_plan_round_trip_and_files_on_disk(tmp_path):
    bufs = hard_instance(50, 4096, 40, seed=2)
    aligned, placed = plan_buffers(bufs, "greedy-size", 1)
    path = tmp_path / "plan.csv"
    write_plan(path, aligned, placed.offsets)
    back, offsets = read_plan(path)
    assert back == aligned and offsets == placed.offsets
    write_problem(tmp_path / "p.csv", bufs)
    assert read_problem(tmp_path / "p.csv") == bufs


def test_column_order_and_extra_columns_do_not_matter():
    bufs = read_problem(text("size,upper,note,lower,id\n64,2,hello,0,a\n"))
    assert bufs == [Buffer("a", 0, 1, 64)]


@pytest.mark.parametrize("csv_text,line,words", [
    ("id,lower,size\na,0,4\n", 1, "missing column upper"),
    ("id,lower,upper,size\na,0,2,4\nb,1,3,-8\n", 3, "negative size"),
    ("id,lower,upper,size\na,0,2,4\nb,3,3,8\n", 3, "upper 3 <= lower 3"),
    ("id,lower,upper,size\na,0,2,4\nb,1,3,8\na,5,6,1\n", 4, "duplicate id a"),
    ("id,lower,upper,size\na,zero,2,4\n", 2, "lower 'zero' is not an integer"),
    ("id,lower,upper,size\na,0,2\n", 2, "3 fields"),
    ("id,lower,upper,size\na,0,2,4,9\n", 2, "5 fields, the header has 4"),
    ("id,lower,upper,size,id\na,0,2,4,b\n", 1, "column id appears twice"),
    ("foo,bar\n1,2\n", 1, "missing column id, lower, upper, size"),
    ("", 1, "empty file"),
])
def test_bad_problem_csv_names_the_line(csv_text, line, words):
    with pytest.raises(CSVError) as e:
        read_problem(text(csv_text))
    assert e.value.line == line
    assert f"line {line}" in str(e.value) and words in str(e.value)
    assert isinstance(e.value, PlanError) and isinstance(e.value, MinigraphError)


def test_plan_csv_with_an_overlap_names_both_lines():
    plan = ("id,lower,upper,size,offset\n"
            "a,0,4,100,0\n"
            "b,0,2,50,100\n"
            "c,3,6,80,60\n")         # c [3,5] at [60,140) meets a [0,3] at [0,100) at step 3
    with pytest.raises(CSVError) as e:
        read_plan(text(plan))
    msg = str(e.value)
    assert "a (line 2)" in msg and "c (line 4)" in msg and "step 3" in msg
    assert e.value.line == 4


def test_plan_csv_missing_offset_or_negative_offset():
    with pytest.raises(CSVError, match="missing column offset"):
        read_plan(text("id,lower,upper,size\na,0,1,4\n"))
    with pytest.raises(CSVError, match="line 2.*negative offset"):
        read_plan(text("id,lower,upper,size,offset\na,0,1,4,-4\n"))


def test_first_overlap_agrees_with_the_validator():
    bufs = hard_instance(60, 4096, 40, seed=3)
    aligned, placed = plan_buffers(bufs, "bestfit", 1)
    assert first_overlap(aligned, placed.offsets) is None
    bad = dict(placed.offsets)
    a, b = next((x, y) for x in aligned for y in aligned
                if x.id != y.id and x.overlaps_in_time(y))
    bad[b.id] = bad[a.id]
    assert first_overlap(aligned, bad) is not None
    with pytest.raises(PlanError):
        validate_offsets(aligned, bad)


# --- what is not a CSV of ASCII integers in UTF-8 (issue 15, point 12) ----------------------

HEADER = "id,lower,upper,size\n"


def test_a_utf8_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes(("\ufeff" + HEADER + "a,0,2,4\n").encode("utf-8"))
    assert read_problem(path) == [Buffer("a", 0, 1, 4)]
    assert read_problem(text("\ufeff" + HEADER + "a,0,2,4\n")) == [Buffer("a", 0, 1, 4)]
    plan = tmp_path / "plan.csv"
    plan.write_bytes("id,lower,upper,size,offset\na,0,2,4,0\n".encode("utf-8-sig"))
    assert read_plan(plan) == ([Buffer("a", 0, 1, 4)], {"a": 0})


@pytest.mark.parametrize("data,line", [
    (HEADER.encode() + "a,0,2,4\nb\u00e9,0,2,4\n".encode("latin-1"), 3),   # Latin-1 e-acute
    (bytes(range(256)) * 4, 2),                                   # binary: 0x80 on line 2
    (b"\x89PNG\r\n\x1a\n\x00\x00", 1),                             # a PNG header
])
def test_a_file_that_is_not_utf8_text_is_a_csv_error_with_its_line(tmp_path, data, line):
    path = tmp_path / "bad.csv"
    path.write_bytes(data)
    with pytest.raises(CSVError, match="not UTF-8 text") as e:
        read_problem(path)
    assert e.value.line == line and str(path) in str(e.value)
    with path.open("rb") as f, pytest.raises(CSVError, match="not UTF-8 text") as e:
        read_problem(f)                             # an open binary file: the same check
    assert e.value.line == line and str(path) in str(e.value)


def test_a_nul_byte_is_a_csv_error_with_its_line(tmp_path):
    path = tmp_path / "nul.csv"
    path.write_bytes(HEADER.encode() + b"a,0,2,4\x00\n")
    with pytest.raises(CSVError, match="NUL byte") as e:
        read_problem(path)
    assert e.value.line == 2 and f"{path}, line 2" in str(e.value)


@pytest.mark.parametrize("field", [
    "\u0664",          # Arabic-Indic four: int() reads it as 4
    "\uff14",          # full-width four
    "\u09ea",          # Bengali four
    "1_024",           # int() reads 1024
    "\u00b2",          # superscript two: isdigit() but int() fails
    "4.0", "0x10", "", " ",
])
def test_numbers_are_ascii_decimal_digits_only(field):
    with pytest.raises(CSVError, match="size .* is not an integer") as e:
        read_problem(text(HEADER + f"a,0,2,{field}\n"))
    assert e.value.line == 2
    with pytest.raises(CSVError, match="offset .* is not an integer"):
        read_plan(text(f"id,lower,upper,size,offset\na,0,2,4,{field}\n"))


def test_ascii_integers_with_sign_and_spaces_still_read():
    assert read_problem(text(HEADER + "a, +0 , 2 ,0004\n")) == [Buffer("a", 0, 1, 4)]


def test_ids_of_non_ascii_digits_stay_strings():
    bufs = read_problem(text(HEADER + "\u0661,0,2,4\n\u00b2,0,2,4\n"))
    assert [b.id for b in bufs] == ["\u0661", "\u00b2"]
    assert [b.id for b in read_problem(text(HEADER + "7,0,2,4\n"))] == [7]


def test_a_number_beyond_64_bits_is_a_csv_error():
    for big in (str(2**63), "9" * 5000):        # int() refuses 4300+ digits with ValueError
        with pytest.raises(CSVError, match="does not fit in 64 bits") as e:
            read_problem(text(HEADER + f"a,0,2,{big}\n"))
        assert e.value.line == 2 and len(str(e.value)) < 300


def test_a_field_over_the_csv_modules_limit_is_a_csv_error_with_its_line():
    huge = "x" * (csv.field_size_limit() + 1)
    with pytest.raises(CSVError, match="field larger than field limit") as e:
        read_problem(text(HEADER + "a,0,2,4\n" + f"{huge},0,2,4\n"))
    assert e.value.line == 3
    with pytest.raises(CSVError, match="line 1"):
        read_problem(text(huge + "\n"))


def test_a_missing_file_or_a_directory_is_a_csv_error_naming_it(tmp_path):
    for path in (tmp_path / "nope.csv", tmp_path):
        with pytest.raises(CSVError, match="cannot read the file") as e:
            read_problem(path)
        assert str(path) in str(e.value)


def test_every_csv_refusal_is_a_minigraph_error_never_a_bare_one():
    for data in (b"\xff\xfe", b"id,lower,upper,size\n\xd9\xa4,0,2,\xd9\xa4\n",
                 b"id,lower,upper,size\n\"a,0,2,4\n", bytes(range(256))):
        with pytest.raises(MinigraphError):
            read_problem(io.BytesIO(data))


# --- the `minigraph plan` subcommand -------------------------------------------------------

def cli(*argv: str) -> int:
    return run(add_arguments(argparse.ArgumentParser()).parse_args(list(argv)))


def test_cli_plans_a_csv_and_prints_the_numbers(tmp_path, capsys):
    path = tmp_path / "seed.csv"
    write_problem(path, ge_worked_example())
    assert cli(str(path), "--planner", "ge") == 0
    out = capsys.readouterr().out
    assert "buffers             5" in out
    assert "theoretical minimum 4608 B" in out and "arena               4608 B" in out
    assert "ratio               1.0000" in out and "time" in out
    assert cli(str(path), "--planner", "ge-max") == 0
    assert "arena               6656 B" in capsys.readouterr().out


def test_cli_writes_a_plan_that_check_accepts(tmp_path, capsys):
    problem, plan = tmp_path / "p.csv", tmp_path / "plan.csv"
    write_problem(problem, hard_instance(30, 4096, 30, seed=0))
    assert cli(str(problem), "--planner", "ilp", "--time-limit", "10", "-o", str(plan)) == 0
    out = capsys.readouterr().out
    assert "arena               4096 B" in out and "optimal" in out
    assert cli("--check", str(plan)) == 0
    assert "valid plan" in capsys.readouterr().out


def test_cli_alignment_rounds_sizes(tmp_path, capsys):
    path = tmp_path / "p.csv"
    path.write_text("id,lower,upper,size\na,0,2,100\nb,1,3,600\n")
    assert cli(str(path), "--planner", "greedy-size", "--alignment", "512") == 0
    assert "arena               1536 B" in capsys.readouterr().out


def test_cli_check_rejects_an_overlapping_plan(tmp_path, capsys):
    path = tmp_path / "bad.csv"
    path.write_text("id,lower,upper,size,offset\na,0,4,100,0\nb,2,3,10,50\n")
    assert cli("--check", str(path)) == 2
    err = capsys.readouterr().err
    assert "line 3" in err and "overlap" in err


def test_cli_reports_bad_input_and_bad_usage(tmp_path, capsys):
    path = tmp_path / "p.csv"
    path.write_text("id,lower,upper,size\na,0,2,-1\n")
    assert cli(str(path)) == 2
    assert "negative size" in capsys.readouterr().err
    assert cli() == 2
    assert "exactly one of" in capsys.readouterr().err
    write_problem(path, ge_worked_example())
    assert cli(str(path), "--planner", "no-such-planner") == 2
    assert "unknown planner" in capsys.readouterr().err


def test_cli_plans_a_zoo_model(capsys):
    models = pytest.importorskip("minigraph.models")
    name = "mlp" if "mlp" in getattr(models, "MODELS", {"mlp": 0}) else None
    if name is None:
        pytest.skip("no mlp in the zoo")
    assert cli("--model", name, "--batch", "8", "--planner", "ge", "--order", "best") == 0
    out = capsys.readouterr().out
    assert "theoretical minimum" in out and "ratio" in out

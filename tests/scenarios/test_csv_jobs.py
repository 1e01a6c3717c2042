"""CSV job files: each problem is one error naming the CSV file and the line it is on."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from scenarios import ScenarioError, load_scenario
from scenarios.csv_jobs import read_jobs_csv, read_jobs_csv_rows

TINY: dict[str, Any] = yaml.safe_load(
    (Path(__file__).resolve().parents[2] / "scenarios" / "tiny.yaml").read_text()
)
HEADER = "id,project,gpus,duration\n"


def _csv_error(tmp_path: Path, text: str | bytes) -> str:
    path = tmp_path / "jobs.csv"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    with pytest.raises(ScenarioError) as info:
        read_jobs_csv(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    return message.removeprefix(f"{path}: ")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # class 7: reader edge cases
        (HEADER + "j1,research/nlp,8,1h,extra\n", "row 2: 5 fields, the header has 4"),
        (HEADER + "j1,research/nlp,8\n", "row 2: 3 fields, the header has 4"),
        (HEADER + "j1,research/nlp,8," + "x" * 140_000 + "\n", "row 2: a field is longer than 131,072 characters"),
        (HEADER + 'j1,"research/nlp,8,1h\nj2,research/nlp,8,1h\n', 'row 2: a quoted field is never closed'),
        # class 6: silent acceptance
        ("id,id,project,gpus\nj1,j2,research/nlp,8\n", "row 1: column(s) given twice: id"),
        (HEADER, "no jobs: the file has a header but no rows"),
        ("", "empty file: expected a header"),
        # class 4: non-finite numbers
        (HEADER + "j1,research/nlp,8,nan\n", "row 2, column duration: expected a duration"),
        (HEADER + "j1,research/nlp,8,inf\n", "row 2, column duration: expected a duration"),
        # digits Python's int() and float() read but a CSV of jobs should not hold
        (HEADER + "j1,research/nlp,1_6,1h\n", "row 2, column gpus: expected a whole number, got '1_6'"),
        (HEADER + "j1,research/nlp,\u0668,1h\n", "row 2, column gpus: expected a whole number"),
        (HEADER + "j1,research/nlp,8,\u0663h\n", "row 2, column duration: expected a duration"),
        # class 1: decoding
        (HEADER.encode() + "j1,café,8,1h\n".encode("latin-1"), "not UTF-8 text (line 2"),
    ],
)
def test_bad_csv_is_one_error_naming_the_line(tmp_path: Path, text: str | bytes, message: str) -> None:
    """Every malformed CSV fails with ScenarioError naming the file and the line."""
    assert message in _csv_error(tmp_path, text)


def test_row_numbers_count_blank_lines(tmp_path: Path) -> None:
    """Blank lines count, so the error names the line an editor shows."""
    text = HEADER + "\n\nj1,research/nlp,8,1h\n\nj2,research/nlp,eight,1h\n"
    assert _csv_error(tmp_path, text).startswith("row 6, column gpus:")


def test_a_quoted_cell_over_two_lines_is_named_by_its_first_line(tmp_path: Path) -> None:
    """A record that spans lines is named where it starts."""
    text = HEADER + 'j1,research/nlp,8,1h\n"j\n2",research/nlp,0,1h\n'
    assert _csv_error(tmp_path, text).startswith("row 3, column gpus:")


def test_a_utf8_bom_is_not_part_of_the_first_column(tmp_path: Path) -> None:
    """A BOM written by a spreadsheet is dropped, as in YAML."""
    path = tmp_path / "jobs.csv"
    path.write_bytes(b"\xef\xbb\xbf" + (HEADER + "j1,research/nlp,8,1h\n").encode())
    jobs, rows = read_jobs_csv_rows(path)
    assert [j.id for j in jobs] == ["j1"] and rows == [2]


def test_cross_check_errors_name_the_csv_file_and_row(tmp_path: Path) -> None:
    """An unknown project in row 4 names jobs.csv row 4, not workloads.jobs[1] of the YAML."""
    (tmp_path / "jobs.csv").write_text(HEADER + "j1,research/nlp,8,1h\n\nj2,nope,8,1h\n")
    data = copy.deepcopy(TINY)
    data["workloads"] = {"csv": "jobs.csv"}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(ScenarioError) as info:
        load_scenario(tmp_path / "s.yaml")
    assert str(info.value) == f"{tmp_path / 'jobs.csv'}: row 4, column project: unknown project 'nope'"


def test_a_negative_submit_time_in_a_csv_row_is_refused(tmp_path: Path) -> None:
    """`-5m` is refused as a submit time, naming the CSV row."""
    (tmp_path / "jobs.csv").write_text("id,project,gpus,submit\nj1,research/nlp,8,-5m\n")
    data = copy.deepcopy(TINY)
    data["workloads"] = {"csv": "jobs.csv"}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(ScenarioError, match=r"jobs.csv: row 2, column submit: must not be negative"):
        load_scenario(tmp_path / "s.yaml")


def test_a_csv_source_that_is_a_device_is_refused(tmp_path: Path) -> None:
    """`csv: /dev/zero` is refused on its type, not read for ever."""
    data = copy.deepcopy(TINY)
    data["workloads"] = {"csv": "/dev/zero"}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(ScenarioError, match="/dev/zero: cannot read CSV file: not a regular file"):
        load_scenario(tmp_path / "s.yaml")

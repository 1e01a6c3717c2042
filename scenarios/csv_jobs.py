"""Jobs from a CSV file (one row a job; an empty cell takes the default)."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from models import Job
from models.limits import MAX_JOBS, MAX_TABLE_BYTES
from scenarios.errors import ScenarioError, from_validation_error
from scenarios.files import csv_problem, decode_text, read_bytes

COLUMNS = (
    "id", "project", "user", "submit", "duration", "gpus", "gpu_types", "clusters",
    "min_runtime", "resumable", "priority", "urgent", "kind",
)
_LISTS = ("gpu_types", "clusters")
_BOOLS = ("resumable", "urgent")
_WHOLE = ("gpus", "priority")
# ASCII digits only: int() also takes "1_6" and other scripts' digits.
_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+")


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "y", "t"):
        return True
    if low in ("0", "false", "no", "n", "f"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def read_jobs_csv(path: Path) -> list[Job]:
    """Read jobs; columns per :data:`COLUMNS`, lists ``|``-separated (``H100|B200``)."""
    return read_jobs_csv_rows(path)[0]


def read_jobs_csv_rows(path: Path) -> tuple[list[Job], list[int]]:
    """The jobs of a CSV file and the line each starts on (the header is line 1).

    Raises
    ------
    ScenarioError
        Naming the file and the line (and column) of the first problem: not UTF-8, too
        large, an unknown or repeated column, a row whose field count differs from the
        header's, an unterminated quote, a bad value, no rows, too many rows.
    """
    text = decode_text(read_bytes(path, MAX_TABLE_BYTES, "CSV"), path)
    # strict: an unterminated quote is an error, not the rest of the file in one cell.
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    jobs: list[Job] = []
    lines: list[int] = []
    header: list[str] | None = None
    last_line = 0
    try:
        for cells in reader:
            line = last_line + 1  # where this record starts (a quoted cell may span lines)
            last_line = reader.line_num
            if not cells or all(not c.strip() for c in cells):
                continue
            if header is None:
                header = _header(path, line, cells)
                continue
            if len(cells) != len(header):
                raise ScenarioError(
                    path, f"row {line}: {len(cells)} fields, the header has {len(header)}"
                )
            if len(jobs) >= MAX_JOBS:
                raise ScenarioError(path, f"row {line}: more than {MAX_JOBS:,} jobs (the limit)")
            jobs.append(_job(path, line, dict(zip(header, cells, strict=True))))
            lines.append(line)
    except csv.Error as exc:
        raise ScenarioError(path, f"row {last_line + 1}: {csv_problem(exc)}") from None
    if header is None:
        raise ScenarioError(path, "empty file: expected a header with the columns " + ", ".join(COLUMNS))
    if not jobs:
        raise ScenarioError(path, "no jobs: the file has a header but no rows")
    return jobs, lines


def _header(path: Path, line: int, cells: list[str]) -> list[str]:
    header = [c.strip() for c in cells]
    unknown = [c for c in header if c not in COLUMNS]
    if unknown:
        raise ScenarioError(
            path, f"row {line}: unknown column(s): {', '.join(map(repr, unknown))} "
            f"(known: {', '.join(COLUMNS)})"
        )
    repeated = sorted({c for c in header if header.count(c) > 1})
    if repeated:
        raise ScenarioError(path, f"row {line}: column(s) given twice: {', '.join(repeated)}")
    return header


def _job(path: Path, line: int, row: dict[str, str]) -> Job:
    data: dict[str, Any] = {}
    for key, cell in row.items():
        if cell.strip() == "":
            continue
        if key in _LISTS:
            data[key] = [p.strip() for p in cell.split("|") if p.strip()]
        elif key in _WHOLE and not _WHOLE_NUMBER.fullmatch(cell.strip()):
            raise ScenarioError(path, f"row {line}, column {key}: expected a whole number, got {cell.strip()!r}")
        elif key in _BOOLS:
            try:
                data[key] = _bool(cell)
            except ValueError as exc:
                raise ScenarioError(path, f"row {line}, column {key}: {exc}") from None
        else:
            data[key] = cell.strip()
    try:
        return Job.model_validate(data)
    except ValidationError as err:
        error = from_validation_error(err, None)
        column = err.errors(include_url=False)[0]["loc"]
        where = f"row {line}, column {column[0]}" if column else f"row {line}"
        text = error.message.removeprefix(f"{column[0]}: ") if column else error.message
        raise ScenarioError(path, f"{where}: {text}") from None


def write_jobs_csv(jobs: list[Job], path: Path) -> None:
    """Write jobs in the shape :func:`read_jobs_csv` reads."""
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for job in jobs:
            row = job.model_dump(mode="json")
            for key in _LISTS:
                row[key] = "|".join(row[key]) if row[key] else ""
            writer.writerow({k: "" if row.get(k) is None else row[k] for k in COLUMNS})

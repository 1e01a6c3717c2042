"""Jobs from a CSV file (one row a job; an empty cell takes the default)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from models import Job
from scenarios.errors import ScenarioError, from_validation_error

COLUMNS = (
    "id", "project", "user", "submit", "duration", "gpus", "gpu_types", "clusters",
    "min_runtime", "resumable", "priority", "urgent", "kind",
)
_LISTS = ("gpu_types", "clusters")
_BOOLS = ("resumable", "urgent")


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "y", "t"):
        return True
    if low in ("0", "false", "no", "n", "f"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def read_jobs_csv(path: Path) -> list[Job]:
    """Read jobs; columns per :data:`COLUMNS`, lists ``|``-separated (``H100|B200``)."""
    try:
        handle = path.open(newline="")
    except OSError as exc:
        raise ScenarioError(path, f"cannot read: {exc.strerror}") from None
    jobs: list[Job] = []
    with handle:
        reader = csv.DictReader(handle)
        unknown = [c for c in reader.fieldnames or () if c not in COLUMNS]
        if unknown:
            raise ScenarioError(path, f"unknown column(s): {', '.join(unknown)}")
        for row_no, row in enumerate(reader, start=2):
            data: dict[str, Any] = {}
            for key, cell in row.items():
                if cell is None or cell.strip() == "":
                    continue
                if key in _LISTS:
                    data[key] = [p.strip() for p in cell.split("|") if p.strip()]
                elif key in _BOOLS:
                    try:
                        data[key] = _bool(cell)
                    except ValueError as exc:
                        raise ScenarioError(path, f"row {row_no}, column {key}: {exc}") from None
                else:
                    data[key] = cell.strip()
            try:
                jobs.append(Job.model_validate(data))
            except ValidationError as err:
                raise from_validation_error(err, path, prefix=f"row {row_no}") from None
    return jobs


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

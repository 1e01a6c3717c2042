"""Jobs from a Philly trace (``workloads.philly``), by documented, deterministic rules.

The trace (format in ``scenarios/data/PROVENANCE.md``) has one row a job with the columns
``timestamp`` (``YYYY-MM-DD HH:MM:SS``), ``duration`` (seconds), ``num_gpus``,
``gpu_time`` (duration x num_gpus) and ``cluster`` (the Philly virtual cluster, a team).
Other columns are ignored. It has no GPU type, user, project or contract, so the importer
assigns them (``docs/scenarios.md`` has the same rules for users):

Time
    ``submit`` is the row's timestamp minus midnight of the earliest row's day (the
    timestamps carry no zone; they are read as UTC; set the scenario's ``start`` to that
    midnight to anchor the wall clock). With ``days``, rows submitted at or
    after ``days x 24 h`` are dropped. Durations are kept as in the trace, even those that
    run past the week.

Job id
    ``philly-NNNNN``, NNNNN being the row's line number in the file (the header is line
    1), so a job can be traced back to its row.

Project
    ``project_map`` maps a virtual cluster id to a project. Unmapped virtual clusters are
    sorted by their total GPU-time in the imported rows (largest first, ties by id) and
    dealt round-robin onto the scenario's projects sorted by effective share (largest
    first, ties in tree order): the heaviest team lands on the best-funded project.

User
    A virtual cluster with ``n`` imported jobs has ``k = clamp(round(sqrt(n) / 3), 1, 10)``
    users, named ``{cluster}-u0`` .. ``{cluster}-u{k-1}``; its jobs go to them
    round-robin in trace order.

GPU type and cluster
    Every job may run only on ``gpu_type`` (and only on ``cluster`` when given).

Contract (first rule that matches)
    1. Debug: ``num_gpus <= 8`` and ``duration <= 1 h``. Minimum runtime 5 min when the
       duration is at most 10 min, 10 min when at most 30 min, else 15 min; not
       resumable.
    2. Unallocated: a fraction ``unallocated_share`` (default 0.18, the institute's
       figure) of the remaining rows, chosen by a CRC-32 of the row's own fields
       (``timestamp,duration,num_gpus,cluster``) so the choice survives trimming and
       reordering. Minimum runtime 0, resumable, ``kind: batch`` (the shape rule would
       call a free job of 8 GPUs or fewer ``debug``).
    3. Large: ``num_gpus >= 8``. Minimum runtime 2 h, resumable.
    4. Otherwise: minimum runtime 1 h, resumable.
    Minimum runtimes are capped at the policy's ``max_min_runtime``. Priority is 0 and
    no job is urgent.

Errors
    A missing column, a row with a bad value (or whose ``gpu_time`` is not
    ``duration x num_gpus``), a gang that fits no allowed pool, or a file without rows
    raises :class:`~scenarios.errors.ScenarioError` naming the file and the row (its line
    number).
"""

from __future__ import annotations

import csv
import io
import math
import zlib
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from models import Job, JobKind, PhillySpec, Scenario, effective_shares
from models.limits import MAX_DAYS, MAX_GPUS, MAX_JOBS, MAX_SECONDS, MAX_TABLE_BYTES
from scenarios.errors import ScenarioError
from scenarios.files import csv_problem, decode_text, read_bytes

COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
"""The columns a Philly trace must have."""

DAY = 86400.0
DEBUG_MAX_GPUS = 8
DEBUG_MAX_DURATION = 3600.0
LARGE_MIN_GPUS = 8
MAX_USERS_PER_CLUSTER = 10


@dataclass(frozen=True)
class TraceRow:
    """One validated row of a Philly trace."""

    line: int
    timestamp: datetime
    duration: float
    gpus: int
    cluster: str
    text_key: str  # the row's own fields, for the unallocated hash


def read_trace(path: Path) -> list[TraceRow]:
    """Read and check every row of a Philly trace file.

    Raises
    ------
    ScenarioError
        Naming ``path`` and the line number of the first bad row or the missing columns.
    """
    text = decode_text(read_bytes(path, MAX_TABLE_BYTES, "Philly trace"), path)
    # strict: an unterminated quote is an error, not the rest of the file in one cell.
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        return _read_rows(path, reader)
    except csv.Error as exc:
        raise ScenarioError(path, f"row {reader.line_num}: {csv_problem(exc)}") from None


def _read_rows(path: Path, reader: Any) -> list[TraceRow]:
    rows: list[TraceRow] = []
    header = next(reader, None)
    if header is None:
        raise ScenarioError(path, "empty file: expected a header with " + ", ".join(COLUMNS))
    header = [h.strip() for h in header]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise ScenarioError(
            path, f"line 1: missing column(s) {', '.join(missing)} (a Philly trace has "
            f"{', '.join(COLUMNS)})"
        )
    repeated = sorted({c for c in COLUMNS if header.count(c) > 1})
    if repeated:
        raise ScenarioError(path, f"line 1: column(s) given twice: {', '.join(repeated)}")
    index = {c: header.index(c) for c in COLUMNS}
    for cells in reader:
        line = reader.line_num
        if not cells or all(not c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            raise ScenarioError(
                path, f"row {line}: expected {len(header)} fields, got {len(cells)}"
            )
        if len(rows) >= MAX_JOBS:
            raise ScenarioError(path, f"row {line}: more than {MAX_JOBS:,} jobs (the limit)")
        rows.append(_parse_row(path, line, {c: cells[i].strip() for c, i in index.items()}))
    if not rows:
        raise ScenarioError(path, "no jobs: the trace has a header but no rows")
    return rows


def _parse_row(path: Path, line: int, cell: dict[str, str]) -> TraceRow:
    def bad(column: str, expected: str) -> ScenarioError:
        return ScenarioError(
            path, f"row {line}, column {column}: expected {expected}, got {cell[column]!r}"
        )

    # fromisoformat is ~10x faster than strptime; it also takes ISO variants, but not
    # zones, which would not mix with the trace's naive times.
    try:
        timestamp = datetime.fromisoformat(cell["timestamp"])
    except ValueError:
        timestamp = None
    if timestamp is None or timestamp.tzinfo is not None:
        raise bad("timestamp", "a time as YYYY-MM-DD HH:MM:SS")
    duration = _number(cell["duration"])
    if duration is None or duration <= 0 or duration > MAX_SECONDS:
        raise bad("duration", f"a positive number of seconds, at most {MAX_SECONDS:g}")
    gpus_f = _number(cell["num_gpus"])
    if gpus_f is None or gpus_f < 1 or gpus_f > MAX_GPUS or gpus_f != int(gpus_f):
        raise bad("num_gpus", f"a whole number of GPUs from 1 to {MAX_GPUS:,}")
    gpus = int(gpus_f)
    gpu_time = _number(cell["gpu_time"])
    if gpu_time is None:
        raise bad("gpu_time", "a number of GPU-seconds")
    # A mismatch usually means shifted or swapped columns: refuse rather than guess.
    if not math.isclose(gpu_time, duration * gpus, rel_tol=1e-3, abs_tol=1.0):
        raise ScenarioError(
            path,
            f"row {line}, column gpu_time: {cell['gpu_time']} is not duration x num_gpus "
            f"({duration:g} x {gpus} = {duration * gpus:g})",
        )
    cluster = cell["cluster"]
    if not cluster:
        raise bad("cluster", "a virtual cluster id")
    key = f"{cell['timestamp']},{cell['duration']},{cell['num_gpus']},{cluster}"
    return TraceRow(line, timestamp, duration, gpus, cluster, key)


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def import_philly(scenario: Scenario, spec: PhillySpec, base_dir: Path) -> list[Job]:
    """Jobs of the Philly trace ``spec.path`` (relative to ``base_dir``) for ``scenario``.

    Parameters
    ----------
    scenario
        Supplies the projects and their shares (the default project rule), the pools the
        gangs must fit and the policy's ``max_min_runtime``.
    spec
        The trace path, ``gpu_type``, optional ``cluster``, ``project_map``, ``days`` and
        ``unallocated_share``.
    base_dir
        The folder that a relative ``spec.path`` is relative to (the scenario file's).

    Returns
    -------
    list[Job]
        One job per kept row, in trace order, by the rules of the module docstring.
    """
    path = base_dir / spec.path
    _check_spec(scenario, spec)
    rows = read_trace(path)
    first_day = min(r.timestamp for r in rows).date()
    origin = datetime.combine(first_day, datetime.min.time())
    horizon = spec.days * DAY if spec.days is not None else math.inf
    timed = [(r, (r.timestamp - origin).total_seconds()) for r in rows]
    kept = [(r, t) for r, t in timed if t < horizon]
    if not kept:  # as a trace of no rows is: a scenario of no jobs is a mistake
        first = min(t for _, t in timed)
        raise ScenarioError(
            path, f"no jobs: days {spec.days:g} keeps no row of the trace (its first job "
            f"arrives {first / 3600:.2f} h into its first day)"
        )
    for r, t in kept:
        if t > MAX_SECONDS:
            raise ScenarioError(
                path, f"row {r.line}, column timestamp: {t / DAY:,.0f} days after the first "
                f"day of the trace, above the limit of {MAX_DAYS:g} days (trim the trace or "
                "set days)"
            )
    projects = _project_rule(scenario, spec, [r for r, _ in kept])
    users = _user_rule([r for r, _ in kept])
    gpu_types = (spec.gpu_type,)
    clusters = (spec.cluster,) if spec.cluster is not None else None
    max_min = scenario.policy.max_min_runtime
    fits: dict[int, bool] = {}
    jobs: list[Job] = []
    for r, t in kept:
        min_runtime, resumable = contract(r.gpus, r.duration, r.text_key, spec.unallocated_share)
        job = Job(
            id=f"philly-{r.line:05d}",
            project=projects[r.cluster],
            user=users[r.line],
            gpus=r.gpus,
            gpu_types=gpu_types,
            clusters=clusters,
            submit=t,
            duration=r.duration,
            min_runtime=min(min_runtime, max_min),
            resumable=resumable,
            # Free work is never debug work, whatever its shape.
            kind=JobKind.BATCH if min_runtime == 0 else None,
        )
        if r.gpus not in fits:
            fits[r.gpus] = any(
                scenario.job_fits(job, c, p.gpu_type) for c in scenario.clusters for p in c.pools()
            )
        if not fits[r.gpus]:
            where = f"{spec.gpu_type}" + (f" pool of cluster {spec.cluster}" if spec.cluster else " pool")
            raise ScenarioError(
                path, f"row {r.line}, column num_gpus: a gang of {r.gpus} GPUs fits no {where} "
                "of the scenario (make a node group larger, or trim the trace)"
            )
        jobs.append(job)
    return jobs


def contract(gpus: int, duration: float, key: str, unallocated_share: float) -> tuple[float, bool]:
    """``(min_runtime, resumable)`` of a trace job by the rules of the module docstring."""
    if gpus <= DEBUG_MAX_GPUS and duration <= DEBUG_MAX_DURATION:
        if duration <= 600:
            return 300.0, False
        if duration <= 1800:
            return 600.0, False
        return 900.0, False
    if zlib.crc32(key.encode()) % 10_000 < unallocated_share * 10_000:
        return 0.0, True
    if gpus >= LARGE_MIN_GPUS:
        return 7200.0, True
    return 3600.0, True


def _check_spec(scenario: Scenario, spec: PhillySpec) -> None:
    # Also checked by the Scenario model (with the scenario file's name); kept here for
    # callers that build a spec by hand.
    if spec.gpu_type not in scenario.gpu_types:
        raise ScenarioError(None, f"workloads.philly.gpu_type: unknown GPU type {spec.gpu_type!r}")
    if spec.cluster is not None and spec.cluster not in {c.name for c in scenario.clusters}:
        raise ScenarioError(None, f"workloads.philly.cluster: unknown cluster {spec.cluster!r}")
    projects = set(scenario.projects)
    for vc, project in spec.project_map.items():
        if project not in projects:
            raise ScenarioError(
                None, f"workloads.philly.project_map.{vc}: unknown project {project!r}"
            )


def _project_rule(scenario: Scenario, spec: PhillySpec, rows: list[TraceRow]) -> dict[str, str]:
    """Virtual cluster -> project: the map, then the default round-robin rule."""
    gpu_time: dict[str, float] = defaultdict(float)
    for r in rows:
        gpu_time[r.cluster] += r.duration * r.gpus
    shares = effective_shares(scenario.org)
    order = {p: i for i, p in enumerate(scenario.projects)}
    by_share = sorted(scenario.projects, key=lambda p: (-shares[p], order[p]))
    unmapped = sorted(
        (vc for vc in gpu_time if vc not in spec.project_map), key=lambda vc: (-gpu_time[vc], vc)
    )
    out = {vc: by_share[i % len(by_share)] for i, vc in enumerate(unmapped)}
    out.update({vc: p for vc, p in spec.project_map.items() if vc in gpu_time})
    return out


def _user_rule(rows: list[TraceRow]) -> dict[int, str]:
    """Row line -> user, round-robin over each virtual cluster's users."""
    count: dict[str, int] = defaultdict(int)
    for r in rows:
        count[r.cluster] += 1
    users_in = {
        vc: min(MAX_USERS_PER_CLUSTER, max(1, round(math.sqrt(n) / 3))) for vc, n in count.items()
    }
    seen: dict[str, int] = defaultdict(int)
    out: dict[int, str] = {}
    for r in rows:
        out[r.line] = f"{r.cluster}-u{seen[r.cluster] % users_in[r.cluster]}"
        seen[r.cluster] += 1
    return out

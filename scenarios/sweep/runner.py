"""Running one point: build its scenario, simulate it, and turn the result into a row.

:func:`run_point` is what runs on the Dask workers; it never raises for a point's own
trouble (that becomes the row's ``error``).
"""

from __future__ import annotations

import inspect
import json
import logging
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from scenarios.errors import ScenarioError
from scenarios.sweep.edits import point_scenario
from scenarios.sweep.errors import (
    ELAPSED_COLUMN,
    ERROR_COLUMN,
    POINT_COLUMN,
    POLICY_COLUMN,
    SEED_COLUMN,
)
from scenarios.sweep.grid import SweepBase, SweepPoint

log = logging.getLogger("scenarios.sweep")

#: A function ``(scenario, policy, *, days, **options) -> result`` whose result has a
#: ``summary`` mapping (or is that mapping). The default is the real simulator.
Runner = Callable[..., Any]


#: ``hours(point_key, hours_done, hours_total)``: simulated time of a running point.
HoursCallback = Callable[[str, float, float], None]
#: How often (wall seconds) a running point reports its simulated hours at most.
HOURS_EVERY_S = 0.5


@dataclass(frozen=True)
class PointTask:
    """Everything a worker needs to run one point; picklable.

    ``keep``: also return the runner's whole result (the what-if app needs the per
    project and per job tables, not only the summary row). ``hours_topic``: on a Dask
    worker, the event topic the point's simulated hours are logged to. ``side_by_side``:
    the point runs beside others on the same cores (on Dask workers), so a ``mip``
    point plans a decomposed epoch in one process, not one per core, unless its
    options say how many (``lanes``).
    """

    base: SweepBase
    point: SweepPoint
    days: float | None
    runner: Runner | None = None
    keep: bool = False
    hours_topic: str | None = None
    side_by_side: bool = False


def takes_progress_callable(runner: Runner) -> bool:
    """Whether ``runner`` accepts ``progress=callable(hours_done, hours_total)``.

    The simulator's ``progress`` was a flag first; a callable is fed only to a runner
    whose signature or docstring says it takes one (passing it to the flag would only
    draw a progress bar on the worker's stderr).
    """
    try:
        parameter = inspect.signature(runner).parameters.get("progress")
    except (TypeError, ValueError):
        return False
    if parameter is None:
        return False
    annotation = str(parameter.annotation)
    doc = (inspect.getdoc(runner) or "").lower()
    return "Callable" in annotation or "callable" in doc


def flatten_summary(summary: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested metric maps become dotted columns: ``wait_p90_s`` -> ``wait_p90_s.debug``."""
    out: dict[str, Any] = {}
    for name, value in summary.items():
        column = f"{prefix}{name}"
        if isinstance(value, Mapping):
            out.update(flatten_summary(value, column + "."))
        elif value is None or isinstance(value, bool | int | float | str):
            out[column] = value
        elif hasattr(value, "item"):  # numpy scalars
            out[column] = value.item()
        else:
            out[column] = json.dumps(value, default=str)
    return out


def run_point(task: PointTask, hours: HoursCallback | None = None) -> dict[str, Any]:
    """Build the point's scenario, simulate it and return its result row.

    Any exception of the point (an invalid scenario, a simulator error) becomes the
    row's ``error`` instead of propagating, so one bad point never stops the others.
    ``hours`` hears the point's simulated hours as they advance, when the runner can
    tell them (:func:`takes_progress_callable`).
    """
    return run_point_kept(task, hours)[0]


def run_point_kept(task: PointTask, hours: HoursCallback | None = None) -> tuple[dict[str, Any], Any]:
    """:func:`run_point`, also returning the runner's result (``None`` if it failed or
    ``task.keep`` is false)."""
    point = task.point
    row = _row_head(point)
    kept: Any = None
    started = time.perf_counter()
    try:
        scenario = point_scenario(task.base, point)
        runner = task.runner
        if runner is None:
            from planner.simulator import simulate

            runner = simulate
        options = dict(point.options)
        if task.side_by_side and point.policy == "mip":
            # The workers already take the cores: a lane per core in each would
            # oversubscribe them.
            options.setdefault("lanes", 1)
        report = hours or _topic_reporter(task.hours_topic)
        if report is not None and takes_progress_callable(runner):
            options["progress"] = _throttled(point.key, report)
        try:
            result = runner(scenario, point.policy, days=task.days, **options)
        except TypeError:
            if "progress" not in options:
                raise
            # A runner whose progress is only a flag after all: run it without.
            del options["progress"]
            result = runner(scenario, point.policy, days=task.days, **options)
        summary = result if isinstance(result, Mapping) else result.summary
        for column, value in flatten_summary(summary).items():
            # A metric never overwrites the point's own columns (policy, error...).
            row[f"summary.{column}" if column in row else column] = value
        if task.keep:
            kept = result
    except Exception as exc:
        row[ERROR_COLUMN] = _describe(exc)
        log.debug("point %s failed:\n%s", point.key, traceback.format_exc())
    row[ELAPSED_COLUMN] = round(time.perf_counter() - started, 3)
    return row, kept


def _throttled(key: str, report: HoursCallback) -> Callable[[float, float], None]:
    """``progress(hours_done, hours_total)`` for the runner, passed on at most every
    :data:`HOURS_EVERY_S` (and always at the end)."""
    last = [0.0]

    def progress(done: float, total: float) -> None:
        now = time.monotonic()
        if now - last[0] >= HOURS_EVERY_S or done >= total:
            last[0] = now
            report(key, float(done), float(total))

    return progress


def _topic_reporter(topic: str | None) -> HoursCallback | None:
    """On a Dask worker, log simulated hours as events of ``topic`` for the client."""
    if topic is None:
        return None
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        return None

    def report(key: str, done: float, total: float) -> None:
        worker.log_event(topic, {"point": key, "done": done, "total": total})

    return report


def _row_head(point: SweepPoint) -> dict[str, Any]:
    row: dict[str, Any] = {POINT_COLUMN: point.key, **dict(point.params)}
    if point.seed is not None:
        row[SEED_COLUMN] = point.seed
    row[POLICY_COLUMN] = point.policy
    row[ERROR_COLUMN] = None
    return row


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ScenarioError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"



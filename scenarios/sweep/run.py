"""The sweep: expand the grid, skip finished points, run the rest, gather the rows."""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from models import Scenario
from scenarios.sweep.cluster import dask_client, run_on_dask
from scenarios.sweep.errors import ERROR_COLUMN, POINT_COLUMN, SweepError
from scenarios.sweep.grid import SweepBase, expand
from scenarios.sweep.runner import PointTask, Runner, run_point_kept
from scenarios.sweep.spec import SweepConfig
from scenarios.sweep.store import PointStore, _frame

if TYPE_CHECKING:
    import pandas as pd
    from distributed import Client

log = logging.getLogger("scenarios.sweep")


@dataclass
class SweepReport:
    """What happened: the result frame and the counts the CLI reports.

    ``results``: each point's whole runner result by point key, when the spec asked to
    ``keep`` them (points that failed or were read back from the store have none).
    """

    frame: pd.DataFrame
    total: int
    skipped: int
    failed: int
    files: list[Path]
    results: dict[str, Any] = field(default_factory=dict)


def _config(
    base: SweepConfig | Scenario | str | Path | SweepBase,
    grid: Mapping[str, Sequence[Any]] | None,
    policies: Sequence[str],
    seeds: Sequence[int] | None,
    given: dict[str, Any],
) -> SweepConfig:
    """One spec from either call form: a :class:`SweepConfig`, or the arguments."""
    if isinstance(base, SweepConfig):
        extra = [name for name, value in given.items() if value != _DEFAULTS[name]]
        if grid is not None or tuple(policies) != ("fairshare",) or seeds is not None:
            extra.append("grid/policies/seeds")
        if extra:
            raise TypeError(f"pass a SweepConfig alone, not with {', '.join(extra)}")
        return base
    return SweepConfig(
        base=base,
        grid=grid or {},
        policies=[policies] if isinstance(policies, str) else policies,
        seeds=seeds,
        options=given["options"] or {},
        **{k: v for k, v in given.items() if k != "options"},
    )


_DEFAULTS: dict[str, Any] = {
    "days": None,
    "options": None,
    "out": None,
    "workers": 0,
    "scheduler": None,
    "client": None,
    "progress": False,
    "runner": None,
}


def sweep(
    base: SweepConfig | Scenario | str | Path,
    grid: Mapping[str, Sequence[Any]] | None = None,
    policies: Sequence[str] = ("fairshare",),
    seeds: Sequence[int] | None = None,
    *,
    days: float | None = None,
    options: Mapping[str, Any] | None = None,
    out: str | Path | None = None,
    workers: int = 0,
    scheduler: str | None = None,
    client: Client | None = None,
    progress: bool = False,
    runner: Runner | None = None,
) -> pd.DataFrame:
    """Simulate every point of a grid of scenario edits under each policy and seed.

    Parameters
    ----------
    base
        Or a :class:`SweepConfig` holding every argument (then give no other).
        Otherwise: the scenario to edit: a loaded :class:`Scenario`, a scenario file or a bundled
        scenario name (``"tiny"``). Pass the file to sweep ``workloads.generate.*`` or
        seeds: loading replaces a generated workload by its jobs.
    grid
        Dotted path -> list of values, e.g. ``{"policy.lookback": ["3d", "7d"],
        "org.research.share": [2, 3]}``; the sweep runs the cartesian product. See the
        module docstring for the keys.
    policies
        Simulator policies (``"legacy"``, ``"fairshare"``, ``"mip"``); each point runs
        under each.
    seeds
        Generator seeds (``workloads.generate.seed``); each point runs under each.
    days
        Simulated days (``None``: the simulator's default).
    options
        Simulator options for every point (``time_limit`` of ``mip``, ``seed`` of
        ``legacy``...); each policy gets the ones it takes. Grid keys
        ``options.<name>`` sweep an option.
    out
        Folder for the results: one file per finished point under ``out/points/`` as it
        completes, then ``out/results.csv`` and ``out/results.parquet``. A rerun with
        the same ``out`` skips the points that finished without error.
    workers
        ``0`` runs the points one after the other in this process; ``N >= 1`` starts a
        local Dask cluster of ``N`` worker processes with one thread each. Scripts
        using workers need an ``if __name__ == "__main__":`` guard.
    scheduler
        Address of an existing Dask scheduler (``tcp://host:8786``) to run on instead.
    client
        An existing ``distributed.Client`` to run on instead.
    progress
        Show a progress bar on stderr (and report failed points there).
    runner
        The function that simulates one point, ``runner(scenario, policy, *, days,
        **options)``, returning an object with a ``summary`` mapping (or the mapping).
        Defaults to :func:`planner.simulator.simulate`; must be picklable for Dask.

    Returns
    -------
    pandas.DataFrame
        One row per point and policy (and seed), in grid order: ``point`` (the point's
        key), the grid keys, ``seed``, ``policy``, ``error`` (``None`` when the point
        ran), the summary metrics with nested maps flattened (``wait_p90_s.debug``) and
        ``elapsed_s`` (wall seconds the point took).

    Raises
    ------
    SweepError
        For input no point could run with (an unknown grid key, seeds for a workload
        that is not generated, an unknown policy, an unreachable scheduler).
    ScenarioError
        When the base scenario itself is invalid.
    """
    given = dict(
        days=days, options=options, out=out, workers=workers, scheduler=scheduler,
        client=client, progress=progress, runner=runner,
    )
    return _run(_config(base, grid, policies, seeds, given)).frame


def run_sweep(spec: SweepConfig) -> SweepReport:
    """:func:`sweep` of one :class:`SweepConfig`, also returning how many points were
    skipped and failed (and, with ``SweepConfig(keep=True)``, each point's whole
    result). The argument form is :func:`sweep`'s alone."""
    if not isinstance(spec, SweepConfig):
        raise TypeError(
            f"run_sweep takes a SweepConfig, not {type(spec).__name__}; "
            "sweep() takes the arguments one by one"
        )
    return _run(spec)


def _run(spec: SweepConfig) -> SweepReport:
    sweep_base = spec.base if isinstance(spec.base, SweepBase) else SweepBase.from_any(spec.base)
    policies = [spec.policies] if isinstance(spec.policies, str) else list(spec.policies)
    options = dict(spec.options or {})
    policy_takes: Mapping[str, Sequence[str]] | None = None
    if spec.runner is None:
        from planner.scheduler import OPTIONS, POLICY_NAMES

        policy_takes = OPTIONS
        unknown = [p for p in policies if p not in POLICY_NAMES]
        if unknown:
            raise SweepError(
                None, f"policies: unknown policy {unknown[0]!r} (known: {', '.join(POLICY_NAMES)})"
            )
    if spec.workers < 0:
        raise SweepError(None, f"workers: expected 0 or more, got {spec.workers}")
    points = expand(
        sweep_base, spec.grid or {}, policies, spec.seeds,
        days=spec.days, options=options, policy_takes=policy_takes,
    )
    if isinstance(spec.out, str) and not spec.out.strip():
        raise SweepError(None, "out: must not be empty (leave it out to write nothing)")
    store = PointStore(spec.out) if spec.out is not None else None
    rows: dict[str, dict[str, Any]] = store.finished(p.key for p in points) if store else {}
    for point in points:
        if point.key in rows:
            # The grid values as given, not as stored (Parquet turns a list into an
            # array, and keeps a value it has no type for as its JSON text).
            rows[point.key].update(point.params)
    skipped = len(rows)
    todo = {p.key: p for p in points if p.key not in rows}
    tasks = [PointTask(sweep_base, p, spec.days, spec.runner, keep=spec.keep) for p in todo.values()]
    results: dict[str, Any] = {}
    failed = 0

    from tqdm import tqdm

    bar = tqdm(
        total=len(points),
        initial=skipped,
        desc="sweep",
        unit="point",
        file=sys.stderr,
        disable=not spec.progress,
        dynamic_ncols=True,
    )

    def finish(row: dict[str, Any], result: Any) -> None:
        nonlocal failed
        key = str(row[POINT_COLUMN])
        rows[key] = row
        if result is not None:
            results[key] = result
        if store is not None:
            store.save(row)
        if row.get(ERROR_COLUMN) is not None:
            failed += 1
            point = todo[key]
            message = f"point {point.key} ({point.label()}) failed: {row[ERROR_COLUMN]}"
            if spec.progress:
                tqdm.write(message, file=sys.stderr)
            else:
                log.warning("%s", message)
        bar.update(1)
        if failed:
            bar.set_postfix(failed=failed)
        if spec.on_point is not None:
            spec.on_point(row, result)

    try:
        if tasks:
            # No more local workers than points: each costs a process start.
            with dask_client(min(spec.workers, len(tasks)), spec.scheduler, spec.client) as client:
                if client is None:
                    for task in tasks:
                        finish(*run_point_kept(task, spec.on_hours))
                else:
                    run_on_dask(client, tasks, finish, spec.on_hours)
    except BaseException:
        # Ctrl-C or an unwritable point file: the combined files still get the points
        # finished so far, if they can; the error that stopped the sweep is the one told.
        bar.close()
        if store is not None and rows:
            try:
                store.combine(_frame([rows[p.key] for p in points if p.key in rows]))
            except SweepError as exc:
                log.warning("%s", exc)
        raise
    bar.close()
    frame = _frame([rows[p.key] for p in points if p.key in rows])
    files = store.combine(frame) if store is not None and rows else []
    return SweepReport(
        frame=frame, total=len(points), skipped=skipped, failed=failed, files=files, results=results
    )

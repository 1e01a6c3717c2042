"""Scenario sweeps: the simulator run over a grid of scenario edits, policies and seeds.

A sweep starts from a base scenario, expands ``grid`` (dotted paths into the scenario,
each with a list of values) into its cartesian product, crosses it with ``policies`` and
``seeds``, and simulates every point. Points run in this process, on a local Dask cluster
or on an existing one; each finished point is written to its own file at once, so an
interrupted sweep loses nothing and a rerun skips the finished points.

Grid keys (see ``docs/sweeps.md``):

- ``policy.<field>``: a policy knob, e.g. ``policy.lookback``, ``policy.slices``;
- ``org.<unit path>.share``: a unit's share, the path written with dots or slashes
  (``org.research.share``, ``org.research.nlp.share``);
- ``clusters.<name>.scale``: every node group of a cluster scaled by a factor (rounded,
  at least one node);
- ``clusters.<name>.node_groups[<i>].nodes`` and any other field path; in a list of named
  items (clusters, org units, ...) a segment selects the item of that name;
- ``workloads.generate.<field>``: generator parameters (``load``, ``days``, ``seed``...);
- ``options.<name>``: a simulator option instead of a scenario edit (``options.time_limit``
  of ``mip``); a policy that does not take it runs without it.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import itertools
import json
import logging
import math
import os
import re
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from models import OrgUnit, Scenario, with_shares
from scenarios.errors import ScenarioError, field_path, from_validation_error
from scenarios.load import read_text, resolve_path, scenario_from_dict, scenario_mapping

if TYPE_CHECKING:
    import pandas as pd
    from distributed import Client

# pandas, tqdm and distributed are imported where they are used: `scenarios` exports
# `sweep`, and every gpuplan command imports `scenarios`, so this module must stay cheap.

log = logging.getLogger(__name__)

#: A function ``(scenario, policy, *, days, **options) -> result`` whose result has a
#: ``summary`` mapping (or is that mapping). The default is the real simulator.
Runner = Callable[..., Any]

#: Columns every result row has besides the point's parameters and metrics.
POINT_COLUMN = "point"
POLICY_COLUMN = "policy"
SEED_COLUMN = "seed"
ERROR_COLUMN = "error"
ELAPSED_COLUMN = "elapsed_s"


class SweepError(ScenarioError):
    """Bad sweep input (a grid key, the seeds, the scheduler...): nothing was run."""


class SchedulerUnreachable(SweepError):
    """The Dask scheduler given by address did not answer."""


# -- the base scenario and the points -------------------------------------------------


@dataclass(frozen=True)
class SweepBase:
    """The raw scenario mapping edits apply to, and the file its relative paths use.

    Edits go to the mapping rather than to a validated :class:`Scenario` because loading
    resolves a generated workload into inline jobs, after which ``workloads.generate``
    and the seed could no longer be changed.
    """

    data: dict[str, Any]
    file: str
    fingerprint: str

    @classmethod
    def from_any(cls, base: Scenario | str | Path) -> SweepBase:
        """A base from a loaded :class:`Scenario`, a scenario file or a bundled name.

        The base is validated once here, so a broken base fails before any point runs.
        """
        if isinstance(base, Scenario):
            data = base.model_dump(mode="json")
            file = "<scenario>"
        else:
            path = resolve_path(base)
            data = scenario_mapping(read_text(path), path)
            # The loader's own checks and messages (field path) before any point runs.
            scenario_from_dict(data, path)
            file = str(path.resolve())
        text = json.dumps(data, sort_keys=True, default=str)
        return cls(data=data, file=file, fingerprint=hashlib.sha256(text.encode()).hexdigest())

    @property
    def generated(self) -> bool:
        """Whether the workload comes from the generator (so seeds apply)."""
        workloads = self.data.get("workloads")
        return isinstance(workloads, dict) and workloads.get("generate") is not None


@dataclass(frozen=True)
class SweepPoint:
    """One scenario variant under one policy: what one result row describes."""

    params: tuple[tuple[str, Any], ...]
    policy: str
    seed: int | None
    key: str
    options: tuple[tuple[str, Any], ...] = ()
    """The simulator options this point runs with (the sweep's and its ``options.*``
    grid values), only those its policy takes."""

    def edits(self) -> Iterator[tuple[str, Any]]:
        """The grid values that edit the scenario (all but ``options.*``)."""
        return ((k, v) for k, v in self.params if not k.startswith(OPTION_PREFIX))

    def label(self) -> str:
        """``policy.lookback=3d, policy=fairshare``: the point in words."""
        parts = [f"{k}={v}" for k, v in self.params]
        parts.append(f"{POLICY_COLUMN}={self.policy}")
        if self.seed is not None:
            parts.append(f"{SEED_COLUMN}={self.seed}")
        return ", ".join(parts)


def point_key(
    base: SweepBase,
    params: Iterable[tuple[str, Any]],
    policy: str,
    seed: int | None,
    days: float | None,
    options: Mapping[str, Any],
) -> str:
    """A stable 16-hex-digit key of everything that decides a point's result.

    It covers the base scenario's content, the edits (in any order), the policy, the
    seed, the simulated days and the simulator options, so a rerun recognises its
    finished points and a changed base or setting is not mistaken for one.
    """
    text = json.dumps(
        {
            "base": base.fingerprint,
            "params": sorted([k, v] for k, v in params),
            "policy": policy,
            "seed": seed,
            "days": days,
            "options": dict(options),
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def expand(
    base: SweepBase,
    grid: Mapping[str, Sequence[Any]],
    policies: Sequence[str],
    seeds: Sequence[int] | None = None,
    *,
    days: float | None = None,
    options: Mapping[str, Any] | None = None,
    policy_takes: Mapping[str, Sequence[str]] | None = None,
) -> list[SweepPoint]:
    """Every point of the sweep, in grid order (last key fastest), then policy and seed.

    ``options`` (and ``options.<name>`` grid keys) are simulator options; with
    ``policy_takes`` (policy -> the option names it takes) each point keeps only its
    policy's, and an option no policy of the sweep takes is an error.

    Raises :class:`SweepError` for input that no point could run with: an empty value
    list, a grid key that names nothing in the base, seeds for a workload that is not
    generated, no policies, an option no policy takes.
    """
    options = dict(options or {})
    if not policies:
        raise SweepError(None, "policies: give at least one policy")
    for key, values in grid.items():
        if isinstance(values, str | bytes) or not isinstance(values, Sequence):
            raise SweepError(None, f"grid.{key}: expected a list of values, got {values!r}")
        if not values:
            raise SweepError(None, f"grid.{key}: give at least one value")
        if not key.startswith(OPTION_PREFIX):
            check_key(base, key, values[0])
    if policy_takes is not None:
        taken = {name for p in policies for name in policy_takes.get(p, ())}
        given = [("options." + k, k) for k in options]
        given += [(k, k[len(OPTION_PREFIX) :]) for k in grid if k.startswith(OPTION_PREFIX)]
        for where, name in given:
            if name not in taken:
                raise SweepError(
                    None,
                    f"{where}: no policy of this sweep takes option {name!r} "
                    f"(they take: {', '.join(sorted(taken)) or 'none'})",
                )
    if seeds is not None:
        if not seeds:
            raise SweepError(None, "seeds: give at least one seed (or leave seeds out)")
        if not base.generated:
            raise SweepError(
                None,
                "seeds: the base scenario's workload is not generated (workloads.generate), "
                "so a seed would change nothing",
            )
        if SEED_KEY in grid:
            raise SweepError(None, f"seeds: give seeds or a grid key {SEED_KEY!r}, not both")
    points = []
    keys = list(grid)
    for values in itertools.product(*(grid[k] for k in keys)):
        params = tuple(zip(keys, values, strict=True))
        grid_options = {k[len(OPTION_PREFIX) :]: v for k, v in params if k.startswith(OPTION_PREFIX)}
        for policy in policies:
            point_options = {**options, **grid_options}
            if policy_takes is not None:
                takes = policy_takes.get(policy, ())
                point_options = {k: v for k, v in point_options.items() if k in takes}
            for seed in seeds if seeds is not None else [None]:
                key = point_key(base, params, policy, seed, days, point_options)
                points.append(
                    SweepPoint(params, policy, seed, key, tuple(sorted(point_options.items())))
                )
    return points


# -- applying edits ---------------------------------------------------------------------

SEED_KEY = "workloads.generate.seed"
#: Grid keys under this prefix are simulator options, not scenario edits.
OPTION_PREFIX = "options."
_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _segments(key: str) -> list[str | int]:
    """``clusters.alpha.node_groups[0].nodes`` -> ``['clusters', 'alpha', 'node_groups', 0, 'nodes']``."""
    out: list[str | int] = []
    pos = 0
    for match in _TOKEN.finditer(key):
        between = key[pos : match.start()]
        if between not in ("", "."):
            raise SweepError(None, f"grid key {key!r}: cannot read it as a dotted path")
        out.append(match.group(1) if match.group(1) is not None else int(match.group(2)))
        pos = match.end()
    if not out or pos != len(key):
        raise SweepError(None, f"grid key {key!r}: cannot read it as a dotted path")
    return out


def _unit_paths(units: Any, prefix: str = "") -> Iterator[str]:
    for unit in units if isinstance(units, list) else []:
        if isinstance(unit, dict) and "name" in unit:
            path = f"{prefix}{unit['name']}"
            yield path
            yield from _unit_paths(unit.get("children", []), path + "/")


def _org_unit(data: dict[str, Any], key: str) -> str:
    """The unit path (``research/nlp``) that an ``org.<unit>.share`` key names."""
    written = key[len("org.") : -len(".share")]
    paths = list(_unit_paths(data.get("org", [])))
    found = [p for p in paths if written in (p, p.replace("/", "."))]
    if not found:
        raise SweepError(
            None, f"grid key {key!r}: no org unit {written!r} (units: {', '.join(paths)})"
        )
    if len(found) > 1:
        raise SweepError(
            None, f"grid key {key!r}: ambiguous, matches {', '.join(found)}; write it with '/'"
        )
    return found[0]


def _locate(data: dict[str, Any], key: str) -> tuple[Any, str | int]:
    """The container and slot that ``key`` writes to; missing mappings are created.

    Creating mappings is safe: the scenario models forbid unknown fields, so a misspelt
    key still fails when the point's scenario is validated.
    """
    segments = _segments(key)
    if key.startswith("workloads.generate.") and not (
        isinstance(data.get("workloads"), dict) and data["workloads"].get("generate") is not None
    ):
        raise SweepError(
            None,
            f"grid key {key!r}: the base scenario's workload is not generated "
            "(pass the scenario file, not a loaded Scenario, to keep workloads.generate)",
        )
    node: Any = data
    where = ""
    for i, seg in enumerate(segments[:-1]):
        nxt = segments[i + 1]
        if isinstance(node, list):
            node = _list_item(node, seg, key, where)
        elif isinstance(node, dict):
            if not isinstance(seg, str):
                raise SweepError(None, f"grid key {key!r}: {where or 'the scenario'} is not a list")
            if node.get(seg) is None:
                node[seg] = [] if isinstance(nxt, int) else {}
            node = node[seg]
        else:
            raise SweepError(None, f"grid key {key!r}: {where} has no field {seg!r}")
        where += f"[{seg}]" if isinstance(seg, int) else (f".{seg}" if where else seg)
    last = segments[-1]
    if isinstance(node, list):
        if not isinstance(last, int) or not 0 <= last < len(node):
            item = f"[{last}]" if isinstance(last, int) else f"named {last!r}"
            raise SweepError(None, f"grid key {key!r}: {where} has no item {item}")
    elif not isinstance(node, dict) or not isinstance(last, str):
        raise SweepError(None, f"grid key {key!r}: {where} has no field {last!r}")
    return node, last


def _list_item(items: list[Any], seg: str | int, key: str, where: str) -> Any:
    if isinstance(seg, int):
        if not 0 <= seg < len(items):
            raise SweepError(None, f"grid key {key!r}: {where} has no item [{seg}]")
        return items[seg]
    names = [str(it.get("name")) for it in items if isinstance(it, dict) and "name" in it]
    for item in items:
        if isinstance(item, dict) and item.get("name") == seg:
            return item
    raise SweepError(
        None, f"grid key {key!r}: {where} has no item named {seg!r} (names: {', '.join(names)})"
    )


def _scale_cluster(data: dict[str, Any], key: str) -> dict[str, Any]:
    name = key[len("clusters.") : -len(".scale")]
    cluster = _list_item(data.get("clusters") or [], name, key, "clusters")
    if not isinstance(cluster, dict):
        raise SweepError(None, f"grid key {key!r}: cluster {name!r} is not a mapping")
    return cluster


def check_key(base: SweepBase, key: str, value: Any) -> None:
    """Raise :class:`SweepError` if ``key`` names nothing in the base scenario.

    ``value`` (one of the key's values) is written into a copy of the base to catch a
    misspelt field name, which the models reject as unknown. Errors about the value
    itself are left to the point, which reports them as its own failure.
    """
    data = copy.deepcopy(base.data)
    if key.startswith("org.") and key.endswith(".share"):
        _org_unit(data, key)
    elif key.startswith("clusters.") and key.endswith(".scale") and key.count(".") == 2:
        _scale_cluster(data, key)
    else:
        _locate(data, key)
    try:
        apply_edit(data, key, value)
        Scenario.model_validate(data)  # cheap: a generated workload is not generated here
    except ScenarioError:
        return
    except ValidationError as err:
        for error in err.errors(include_url=False):
            if error["type"] == "extra_forbidden":
                where = field_path(tuple(error["loc"]))
                raise SweepError(None, f"grid key {key!r}: {where} is not a scenario field") from None


def apply_edit(data: dict[str, Any], key: str, value: Any) -> None:
    """Write one grid value into a raw scenario mapping, in place.

    Raises :class:`SweepError` when the key names nothing and :class:`ScenarioError`
    when the value is not allowed (e.g. a share that is not positive).
    """
    if key.startswith("org.") and key.endswith(".share"):
        path = _org_unit(data, key)
        try:
            units = tuple(OrgUnit.model_validate(u) for u in data["org"])
            data["org"] = [u.model_dump(mode="json") for u in with_shares(units, {path: value})]
        except ValidationError as err:
            raise from_validation_error(err, None, prefix=key.rsplit(".", 1)[0]) from None
    elif key.startswith("clusters.") and key.endswith(".scale") and key.count(".") == 2:
        cluster = _scale_cluster(data, key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise ScenarioError(None, f"{key}: expected a positive scale factor, got {value!r}")
        for group in cluster.get("node_groups") or []:
            group["nodes"] = max(1, math.floor(group["nodes"] * value + 0.5))
    else:
        node, slot = _locate(data, key)
        node[slot] = value


def point_scenario(base: SweepBase, point: SweepPoint) -> Scenario:
    """The validated scenario of ``point``: the base with the point's edits applied.

    Relative paths in the base (a CSV workload, a trace) still resolve against the base
    file's folder. Raises :class:`ScenarioError` naming the field for an invalid point.
    """
    data = copy.deepcopy(base.data)
    for key, value in point.edits():
        apply_edit(data, key, value)
    if point.seed is not None:
        apply_edit(data, SEED_KEY, point.seed)
    return scenario_from_dict(data, base.file)


# -- running one point (this function runs on the Dask workers) ---------------------


@dataclass(frozen=True)
class PointTask:
    """Everything a worker needs to run one point; picklable."""

    base: SweepBase
    point: SweepPoint
    days: float | None
    runner: Runner | None = None


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


def run_point(task: PointTask) -> dict[str, Any]:
    """Build the point's scenario, simulate it and return its result row.

    Any exception of the point (an invalid scenario, a simulator error) becomes the
    row's ``error`` instead of propagating, so one bad point never stops the others.
    """
    point = task.point
    row = _row_head(point)
    started = time.perf_counter()
    try:
        scenario = point_scenario(task.base, point)
        runner = task.runner
        if runner is None:
            from planner.simulator import simulate

            runner = simulate
        result = runner(scenario, point.policy, days=task.days, **dict(point.options))
        summary = result if isinstance(result, Mapping) else result.summary
        for column, value in flatten_summary(summary).items():
            # A metric never overwrites the point's own columns (policy, error...).
            row[f"summary.{column}" if column in row else column] = value
    except Exception as exc:
        row[ERROR_COLUMN] = _describe(exc)
        log.debug("point %s failed:\n%s", point.key, traceback.format_exc())
    row[ELAPSED_COLUMN] = round(time.perf_counter() - started, 3)
    return row


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


# -- where results go -------------------------------------------------------------------


class PointStore:
    """One Parquet file per finished point under ``DIR/points/``, plus combined files.

    Each point file is written to a temporary name, flushed to disk and renamed, so a
    crash leaves either the whole row or nothing.
    """

    def __init__(self, out: str | Path) -> None:
        self.dir = Path(out)
        self.points_dir = self.dir / "points"
        try:
            self.points_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SweepError(self.dir, f"cannot create the output folder: {exc.strerror}") from None

    def path(self, key: str) -> Path:
        return self.points_dir / f"{key}.parquet"

    def finished(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Rows of the points among ``keys`` that already ran without error."""
        out: dict[str, dict[str, Any]] = {}
        for key in keys:
            path = self.path(key)
            if not path.exists():
                continue
            try:
                rows = _pandas().read_parquet(path).to_dict("records")
            except Exception as exc:  # an unreadable file is recomputed, not fatal
                log.warning("ignoring unreadable result file %s: %s", path, exc)
                continue
            if rows and _pandas().isna(rows[0].get(ERROR_COLUMN)):
                out[key] = {str(k): v for k, v in rows[0].items()}
                out[key][ERROR_COLUMN] = None
        return out

    def save(self, row: Mapping[str, Any]) -> None:
        """Write one point's row durably (temporary file, fsync, rename)."""
        final = self.path(str(row[POINT_COLUMN]))
        tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
        frame = _frame([dict(row)])
        with open(tmp, "wb") as fh:
            frame.to_parquet(fh, index=False)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
        _fsync_dir(self.points_dir)

    def combine(self, frame: pd.DataFrame) -> list[Path]:
        """Write ``results.csv`` and ``results.parquet`` of the whole sweep."""
        written = []
        csv = self.dir / "results.csv"
        frame.to_csv(csv, index=False)
        written.append(csv)
        parquet = self.dir / "results.parquet"
        try:
            frame.to_parquet(parquet, index=False)
        except (ValueError, TypeError, ImportError):
            # A grid column that mixes types (e.g. 2 and "3d") has no Parquet type.
            frame.astype({c: str for c in frame.columns if frame[c].dtype == object}).to_parquet(
                parquet, index=False
            )
        written.append(parquet)
        return written


def _pandas() -> Any:
    import pandas

    return pandas


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot sync a folder; the rename is still atomic
    finally:
        os.close(fd)


def _frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Rows as a frame; columns in first-seen order with elapsed time last."""
    columns: dict[str, None] = {POINT_COLUMN: None}
    for row in rows:
        for column in row:
            if column != ELAPSED_COLUMN:
                columns[column] = None
    columns.setdefault(POLICY_COLUMN, None)
    columns.setdefault(ERROR_COLUMN, None)
    columns[ELAPSED_COLUMN] = None
    frame: pd.DataFrame = _pandas().DataFrame([dict(r) for r in rows], columns=list(columns))
    # pandas turns None into NaN next to strings; keep None so `error is None` holds.
    errors = frame[ERROR_COLUMN].astype(object)
    frame[ERROR_COLUMN] = errors.where(errors.notna(), None)
    return frame


# -- the sweep ----------------------------------------------------------------------------


@dataclass
class SweepReport:
    """What happened: the result frame and the counts the CLI reports."""

    frame: pd.DataFrame
    total: int
    skipped: int
    failed: int
    files: list[Path]


def sweep(
    base: Scenario | str | Path,
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
        The scenario to edit: a loaded :class:`Scenario`, a scenario file or a bundled
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
    return run_sweep(
        base,
        grid,
        policies,
        seeds,
        days=days,
        options=options,
        out=out,
        workers=workers,
        scheduler=scheduler,
        client=client,
        progress=progress,
        runner=runner,
    ).frame


def run_sweep(
    base: Scenario | str | Path | SweepBase,
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
) -> SweepReport:
    """:func:`sweep`, also returning how many points were skipped and failed."""
    sweep_base = base if isinstance(base, SweepBase) else SweepBase.from_any(base)
    options = dict(options or {})
    if isinstance(policies, str):
        policies = [policies]
    policy_takes: Mapping[str, Sequence[str]] | None = None
    if runner is None:
        from planner.simulator.policies import OPTIONS, POLICY_NAMES

        policy_takes = OPTIONS
        unknown = [p for p in policies if p not in POLICY_NAMES]
        if unknown:
            raise SweepError(
                None, f"policies: unknown policy {unknown[0]!r} (known: {', '.join(POLICY_NAMES)})"
            )
    if workers < 0:
        raise SweepError(None, f"workers: expected 0 or more, got {workers}")
    points = expand(
        sweep_base, grid or {}, policies, seeds, days=days, options=options, policy_takes=policy_takes
    )
    store = PointStore(out) if out is not None else None
    rows: dict[str, dict[str, Any]] = store.finished(p.key for p in points) if store else {}
    skipped = len(rows)
    todo = {p.key: p for p in points if p.key not in rows}
    tasks = [PointTask(sweep_base, p, days, runner) for p in todo.values()]
    failed = 0

    from tqdm import tqdm

    bar = tqdm(
        total=len(points),
        initial=skipped,
        desc="sweep",
        unit="point",
        file=sys.stderr,
        disable=not progress,
        dynamic_ncols=True,
    )

    def finish(row: dict[str, Any]) -> None:
        nonlocal failed
        rows[str(row[POINT_COLUMN])] = row
        if store is not None:
            store.save(row)
        if row.get(ERROR_COLUMN) is not None:
            failed += 1
            point = todo[str(row[POINT_COLUMN])]
            message = f"point {point.key} ({point.label()}) failed: {row[ERROR_COLUMN]}"
            if progress:
                tqdm.write(message, file=sys.stderr)
            else:
                log.warning("%s", message)
        bar.update(1)
        if failed:
            bar.set_postfix(failed=failed)

    try:
        if tasks:
            # No more local workers than points: each costs a process start.
            with _dask_client(min(workers, len(tasks)), scheduler, client) as dask_client:
                if dask_client is None:
                    for task in tasks:
                        finish(run_point(task))
                else:
                    _run_on_dask(dask_client, tasks, finish)
    finally:
        bar.close()
        frame = _frame([rows[p.key] for p in points if p.key in rows])
        files = store.combine(frame) if store is not None and rows else []
    return SweepReport(frame=frame, total=len(points), skipped=skipped, failed=failed, files=files)


@contextmanager
def _dask_client(workers: int, scheduler: str | None, client: Client | None) -> Iterator[Client | None]:
    """The client to run on: the given one, one connected to ``scheduler``, one of a
    new local cluster, or ``None`` (run in this process)."""
    if client is not None:
        yield client
        return
    if scheduler is None and workers == 0:
        yield None
        return
    # distributed's constructors are untyped; go through Any rather than silence mypy.
    dd: Any = importlib.import_module("distributed")
    if scheduler is not None:
        try:
            connected = dd.Client(scheduler, timeout="10s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise SchedulerUnreachable(
                None, f"cannot connect to the Dask scheduler at {scheduler}: {exc}"
            ) from None
        with connected:
            yield connected
        return
    # Processes, one thread each: the simulator is pure Python, so threads would share
    # one GIL. The scheduler's HTTP server takes any free port (a fixed one clashes
    # between concurrent sweeps); the workers start none.
    with (
        dd.LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            worker_dashboard_address=None,
            silence_logs=logging.ERROR,
        ) as cluster,
        dd.Client(cluster) as local,
    ):
        yield local


def _run_on_dask(client: Any, tasks: Sequence[PointTask], finish: Callable[[dict[str, Any]], None]) -> None:
    """Submit every task and hand each row to ``finish`` as soon as it completes.

    A worker that dies mid-point (killed, out of memory) does not lose the point: the
    scheduler reruns it on another worker, up to ``distributed.scheduler.allowed-failures``
    times, after which the point is reported as failed.
    """
    dd: Any = importlib.import_module("distributed")
    run_id = uuid.uuid4().hex[:8]
    futures = {
        client.submit(run_point, task, key=f"sweep-{run_id}-{task.point.key}", pure=False): task
        for task in tasks
    }
    try:
        for future in dd.as_completed(futures):
            task = futures[future]
            try:
                row = future.result()
            except Exception as exc:  # the point's worker died too often, or was lost
                row = _row_head(task.point)
                row[ERROR_COLUMN] = _describe(exc)
                row[ELAPSED_COLUMN] = None
            finish(row)
            future.release()
    finally:
        # On Ctrl-C (or any error) stop the points still queued; finished ones are saved.
        client.cancel(list(futures))

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

The package has one concept per module: ``grid`` (the base, the points and their keys),
``edits`` (writing a grid value into a scenario), ``runner`` (running one point into a
row), ``store`` (the durable result files), ``cluster`` (Dask), ``spec`` (the
:class:`SweepConfig` spec object) and ``run`` (the sweep itself). Everything callers
use is importable from ``scenarios.sweep``.
"""

# pandas, tqdm and distributed are imported where they are used: `scenarios` exports
# `sweep`, and every gpuplan command imports `scenarios`, so this package must stay cheap.

from scenarios.sweep.cluster import dask_client, run_on_dask, start_local_cluster
from scenarios.sweep.edits import apply_edit, check_key, point_scenario
from scenarios.sweep.errors import (
    ELAPSED_COLUMN,
    ERROR_COLUMN,
    OPTION_PREFIX,
    POINT_COLUMN,
    POLICY_COLUMN,
    SEED_COLUMN,
    SEED_KEY,
    SchedulerUnreachable,
    SweepError,
)
from scenarios.sweep.grid import SweepBase, SweepPoint, expand, point_key
from scenarios.sweep.run import SweepReport, run_sweep, sweep
from scenarios.sweep.runner import (
    HoursCallback,
    PointTask,
    Runner,
    flatten_summary,
    run_point,
    run_point_kept,
    takes_progress_callable,
)
from scenarios.sweep.spec import SweepConfig
from scenarios.sweep.store import PointStore

__all__ = [
    "ELAPSED_COLUMN",
    "ERROR_COLUMN",
    "OPTION_PREFIX",
    "POINT_COLUMN",
    "POLICY_COLUMN",
    "SEED_COLUMN",
    "SEED_KEY",
    "HoursCallback",
    "PointStore",
    "PointTask",
    "Runner",
    "SchedulerUnreachable",
    "SweepBase",
    "SweepConfig",
    "SweepError",
    "SweepPoint",
    "SweepReport",
    "apply_edit",
    "check_key",
    "dask_client",
    "expand",
    "flatten_summary",
    "point_key",
    "point_scenario",
    "run_on_dask",
    "run_point",
    "run_point_kept",
    "run_sweep",
    "start_local_cluster",
    "sweep",
    "takes_progress_callable",
]

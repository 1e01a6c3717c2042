"""What-if runs: simulate budgets as replicates, compare result sets, and say what changed.

A result set is one simulation of one scenario (current or edited budgets) under one
scheduler, reduced to the plain DataFrames the app shows (:class:`RunResult`, which
pickles, so it travels back from Dask workers and into caches). Each side of a what-if
runs as several *replicates*: the same workload with its arrival times perturbed, one
seed per replicate, so a change can be told from the noise of the simulation
(``docs/app.md``, *How sure is a change*). The runs go through the sweep machinery
(:mod:`scenarios.sweep`), in this process or on a Dask cluster. The simulator runs with
its in-memory ledger: nothing here writes to a live one.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from models import Scenario, walk

POLICIES = ("mip", "fairshare", "legacy")
POLICY_WORDS = {
    "mip": "gpuplan's epoch planner (mip)",
    "fairshare": "greedy fair share, the institute's design (fairshare)",
    "legacy": "the old priority scheduler (legacy)",
}
CLASSES = ("debug", "batch", "large", "all")
PREVIEW_POLICY = "fairshare"
"""The fast scheduler whose answer is shown first, while a ``mip`` what-if runs."""
JITTER_S = 1800.0
"""Replicates move each job's arrival by up to this many seconds either way."""
DEFAULT_REPLICATES = 3
RUN_OPTIONS: dict[str, dict[str, Any]] = {"mip": {"time_limit": 2.0, "rel_gap": 0.01}}
"""Scheduler options of the what-if's runs, per scheduler. ``mip`` plans each epoch to
the deployed planner's gap target (1 %) but stops the search after 2 s instead of 10 s:
a week is 168 plans, and on ai2-like most of a plan's time is the search running into
its limit, not the model (``docs/app.md``, *Timing*). ``gpuplan run`` keeps its own
defaults."""
QUICK_STAGE = "mip-quick"
"""The stage between the preview and the ``mip`` answer: ``mip`` with quick plans."""
QUICK_OPTIONS: dict[str, Any] = {"time_limit": 0.3, "rel_gap": 0.01}
"""``mip``'s options in the quick stage: each plan's search stops after 0.3 s, and
plans that short start from the LP's rounding (``planner.mip.SHORT_LIMIT``), so none is
the greedy fallback. A week of ai2-like, 3 replicates a side, takes about 2.5 minutes
on 2 cores this way (147.6 s measured), against about 7.5 at 2 s. The programs' changes
agree with the 2 s runs' on 23 of 30 verdicts, none with opposite signs, and the totals
come within their replicates' range (``docs/app.md``, *The quick stage at 0.3 s*). So
it is shown as the quick answer, and the 2 s runs replace it."""
STAGES: dict[str, tuple[str, ...]] = {"mip": (PREVIEW_POLICY, QUICK_STAGE, "mip")}
"""The runs a what-if goes through, each replacing the one before: under ``mip``, the
``fairshare`` preview, the quick ``mip`` answer, then ``mip`` with :data:`RUN_OPTIONS`.
Other schedulers run once."""
QUICK_S = f"{QUICK_OPTIONS['time_limit']:g} s"
"""The quick stage's search per plan, as the page says it."""
FULL_S = f"{RUN_OPTIONS['mip']['time_limit']:g} s"
"""The ``mip`` stage's search per plan, as the page says it."""
STAGE_WORDS = {QUICK_STAGE: f"gpuplan's epoch planner with quick plans (mip, {QUICK_S} a plan)"}
"""How a stage that is not a scheduler of its own is named on the page."""


def stages(policy: str) -> tuple[str, ...]:
    """The stages a what-if under ``policy`` runs, in order (:data:`STAGES`)."""
    return STAGES.get(policy, (policy,))


def stage_run(stage: str) -> tuple[str, dict[str, Any]]:
    """The scheduler and its options that run ``stage``."""
    if stage == QUICK_STAGE:
        return "mip", dict(QUICK_OPTIONS)
    return stage, dict(RUN_OPTIONS.get(stage, {}))


def stage_words(stage: str) -> str:
    """A stage's name on the page: its scheduler's words, or the quick stage's."""
    return STAGE_WORDS.get(stage) or POLICY_WORDS[stage]


WORKER_PRELOAD = (
    "app_streamlit.worker_priority",
    "scenarios.sweep",
    "app_streamlit.whatif",
    "app_streamlit.state",
    "planner.simulator.engine",
    "planner.simulator.metrics",
    "planner.scheduler.fairshare",
    "planner.scheduler.mip",
)
"""What a local Dask worker imports as it starts (:func:`replicate_run` and what it
calls), so the first what-if does not wait for it; the first lowers the worker's
priority below the page's (:mod:`app_streamlit.worker_priority`)."""

OWED_WORDS = (
    "Owed: the GPU-hours a unit's share entitles it to, capped hour by hour by what its "
    "submitted work (waiting or running) could use; what projects cannot use goes to the "
    "others by their shares (hierarchical water-filling). Delivered within owed counts, "
    "hour by hour, only delivered hours up to what was owed, so it never exceeds owed; "
    "delivered / owed is that capped figure over owed."
)


def available_policies() -> tuple[str, ...]:
    """The schedulers of :data:`POLICIES` this installation can simulate, best first."""
    from planner.scheduler import POLICY_NAMES

    return tuple(p for p in POLICIES if p in POLICY_NAMES)


CLASS_WORDS = (
    "Job classes: debug = 8 GPUs or fewer and a minimum runtime of 15 min or less; "
    "large = 64 GPUs or more; batch = the rest; all = every job. A curve that rises "
    "sooner means shorter waits; jobs that had not started by the end of the simulated "
    "period never reach the curve's top."
)

Side = Literal["current", "edited"]
SIDES: tuple[Side, Side] = ("current", "edited")


@dataclass(frozen=True)
class Request:
    """What the user asked to compare; results are stale when it changes."""

    key: str
    shares: tuple[tuple[str, float], ...]
    policy: str
    days: float
    replicates: int = 1


@dataclass(frozen=True)
class RunResult:
    """One result set, as plain data.

    ``projects``: project, owed_gpu_h, delivered_gpu_h, delivered_within_owed_gpu_h,
    delivered_over_owed, wait_p90_s, preemptions.
    ``jobs``: job, project, class, wait_s, started, preemptions.
    ``occupancy``: hours (start of each simulated hour), occupancy (busy / available, 0-1).
    ``replicate``: the replicate's seed (0: the workload as given).
    ``extra``: the scheduler's own figures (``SimulationResult.extra``; for ``mip``, its
    plans and how many were the greedy fallback).
    """

    label: str
    policy: str
    summary: dict[str, Any]
    projects: pd.DataFrame
    jobs: pd.DataFrame
    occupancy: pd.DataFrame
    seconds: float
    replicate: int = 0
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


# -- replicates ----------------------------------------------------------------------------


def perturb_arrivals(scenario: Scenario, seed: int, jitter_s: float = JITTER_S) -> Scenario:
    """The scenario with each job's arrival moved by a uniform offset in ``±jitter_s``.

    Seed 0 is the workload as given. Arrivals never move before the start (0). Only
    submit times change, so the jobs need no re-validation.
    """
    if seed == 0 or jitter_s <= 0:
        return scenario
    rng = random.Random(seed)
    jobs = tuple(
        j.model_copy(update={"submit": max(0.0, j.submit + rng.uniform(-jitter_s, jitter_s))})
        for j in scenario.jobs
    )
    workloads = scenario.workloads.model_copy(update={"jobs": jobs})
    return scenario.model_copy(update={"workloads": workloads})


def simulator_takes_callable() -> bool:
    """Whether ``planner.simulator.simulate`` takes ``progress=callable(done_h, total_h)``
    (it took only a flag at first)."""
    from planner.simulator import simulate
    from scenarios.sweep import takes_progress_callable

    return takes_progress_callable(simulate)


def replicate_run(
    scenario: Scenario,
    policy: str,
    *,
    days: float | None = None,
    budgets: Side = "current",
    replicate: int = 0,
    shares: Mapping[str, float] | None = None,
    jitter_s: float = JITTER_S,
    progress: bool | Callable[[float, float], None] = False,
    **options: Any,
) -> RunResult:
    """Simulate one replicate of one side of a what-if (the sweep's runner).

    ``budgets="edited"`` applies ``shares``; ``replicate`` seeds the arrival perturbation
    (:func:`perturb_arrivals`). ``progress`` may be a callable ``progress(hours_done,
    hours_total)``, passed on when the simulator takes one.
    """
    from app_streamlit.state import with_edited_shares
    from planner.simulator import simulate

    if budgets == "edited":
        scenario = with_edited_shares(scenario, dict(shares or {}))
    scenario = perturb_arrivals(scenario, replicate, jitter_s)
    started = time.monotonic()
    if callable(progress) and not simulator_takes_callable():
        progress = False
    result = simulate(scenario, policy, days=days, progress=progress, **options)
    out = from_simulation(result, policy, time.monotonic() - started)
    return dataclasses.replace(out, label=f"{budgets} budgets", replicate=replicate)


def run(scenario: Scenario, policy: str, days: float) -> RunResult:
    """Simulate ``scenario`` under ``policy`` for its first ``days`` and keep what the app shows."""
    from planner.simulator import simulate

    started = time.monotonic()
    result = simulate(scenario, policy, days=days)
    return from_simulation(result, policy, time.monotonic() - started)


@dataclass(frozen=True)
class Point:
    """One run of a what-if: a side, a scheduler and a replicate."""

    budgets: Side
    policy: str
    replicate: int

    @property
    def label(self) -> str:
        return f"{self.budgets} budgets, {self.policy}, replicate {self.replicate}"


def points_for(policy: str, replicates: int) -> list[Point]:
    """Both sides, each as ``replicates`` runs (seeds 0, 1, ...), under ``policy``."""
    return [Point(side, policy, r) for r in range(replicates) for side in SIDES]


def first_pair(runs: Mapping[Point, RunResult]) -> tuple[RunResult, RunResult] | None:
    """The current and edited result of the lowest replicate, once both are in: the
    first answer the app shows while the other replicates run (``None`` until then)."""
    if not runs:
        return None
    first = min(p.replicate for p in runs)
    got = {p.budgets: r for p, r in runs.items() if p.replicate == first}
    if "current" not in got or "edited" not in got:
        return None
    return got["current"], got["edited"]


def run_points(
    scenario: Scenario,
    points: Sequence[Point],
    shares: Mapping[str, float],
    days: float,
    *,
    fingerprint: str | None = None,
    client: Any = None,
    workers: int = 0,
    on_point: Callable[[Point, RunResult | None, str | None], None] | None = None,
    on_hours: Callable[[Point, float, float], None] | None = None,
    options: Mapping[str, Any] | None = None,
) -> dict[Point, RunResult]:
    """Run ``points`` through the sweep machinery (here, or on Dask with ``client`` or
    ``workers``) and return each point's result.

    ``options`` go to every run; without them, the points of one scheduler get its
    :data:`RUN_OPTIONS`.

    Raises
    ------
    RuntimeError
        If a point failed (with its error), after the others finished.
    """
    from scenarios.sweep import SweepConfig, expand, run_sweep

    wanted = {(p.budgets, p.policy, p.replicate) for p in points}
    policies = list(dict.fromkeys(p.policy for p in points))
    if options is None and len(policies) == 1:
        options = RUN_OPTIONS.get(policies[0], {})
    sides = list(dict.fromkeys(p.budgets for p in points))
    reps = sorted({p.replicate for p in points})
    base = _sweep_base(scenario, fingerprint)
    # Replicate outermost, side fastest: the points go to the workers as pairs (current
    # and edited of replicate 0 first), so the first comparison is in after one round.
    grid: dict[str, list[Any]] = {"options.replicate": reps, "options.budgets": sides}
    all_options = {"shares": dict(shares), **dict(options or {})}
    # The sweep's point key -> our point (the grid may hold combinations not asked for).
    keyed: dict[str, Point] = {}
    for sp in expand(base, grid, policies, days=days, options=all_options):
        params = dict(sp.params)
        point = Point(params["options.budgets"], sp.policy, int(params["options.replicate"]))
        if (point.budgets, point.policy, point.replicate) in wanted:
            keyed[sp.key] = point

    def finished(row: dict[str, Any], result: Any) -> None:
        point = keyed.get(str(row["point"]))
        if point is not None and on_point is not None:
            on_point(point, result, row.get("error"))

    def hours(key: str, done: float, total: float) -> None:
        point = keyed.get(key)
        if point is not None and on_hours is not None:
            on_hours(point, done, total)

    report = run_sweep(
        SweepConfig(
            base=base,
            grid=grid,
            policies=policies,
            days=days,
            options=all_options,
            workers=workers,
            client=client,
            runner=replicate_run,
            keep=True,
            on_point=finished,
            on_hours=hours,
        )
    )
    out: dict[Point, RunResult] = {}
    errors = []
    for row in report.frame.to_dict("records"):
        done = keyed.get(str(row["point"]))
        if done is None:
            continue
        if row["error"] is not None:
            errors.append(f"{done.label}: {row['error']}")
        elif str(row["point"]) in report.results:
            out[done] = report.results[str(row["point"])]
    if errors:
        raise RuntimeError(errors[0])
    return out


_BASE: list[tuple[Scenario, str | None, Any]] = []
"""The last sweep base made by :func:`_sweep_base`, with its scenario and fingerprint."""


def _sweep_base(scenario: Scenario, fingerprint: str | None) -> Any:
    """The sweep base of ``scenario``: the last one when it was made of this same
    (frozen) scenario and fingerprint, so each edit of a what-if does not dump the
    scenario again."""
    from scenarios.sweep import SweepBase

    if _BASE and _BASE[0][0] is scenario and _BASE[0][1] == fingerprint:
        return _BASE[0][2]
    base = SweepBase.of_scenario(scenario, fingerprint)
    _BASE[:] = [(scenario, fingerprint, base)]
    return base


def from_simulation(result: Any, policy: str, seconds: float) -> RunResult:
    """Reduce a ``planner.simulator.SimulationResult`` to a :class:`RunResult`.

    Waits follow the simulator (``docs/metrics.md``): a job not started by the end of
    the simulated period counts the time it waited so far, and ``started`` says which.
    """
    projects = result.projects
    jobs = result.jobs
    occupancy = result.occupancy
    busy = occupancy["busy"].astype(float)
    available = occupancy["available"].astype(float)
    return RunResult(
        label=policy,
        policy=policy,
        summary=dict(result.summary),
        projects=pd.DataFrame(
            {
                "project": projects["project"],
                "owed_gpu_h": projects["owed_gpu_h"].astype(float),
                "delivered_gpu_h": projects["delivered_gpu_h"].astype(float),
                "delivered_within_owed_gpu_h": projects["delivered_within_owed_gpu_h"].astype(float),
                "delivered_over_owed": projects["delivered_over_owed"].astype(float),
                "wait_p90_s": projects["wait_p90_s"].astype(float),
                "preemptions": projects["preemptions"].astype(int),
            }
        ),
        jobs=pd.DataFrame(
            {
                "job": jobs["job"],
                "project": jobs["project"],
                "class": jobs["class"],
                "wait_s": jobs["wait_s"].astype(float),
                "started": jobs["started"].astype(bool),
                "preemptions": jobs["preemptions"].astype(int),
            }
        ),
        occupancy=pd.DataFrame(
            {
                "hours": occupancy["hour"].astype(float),
                "occupancy": (busy / available.where(available > 0)).astype(float),
            }
        ),
        seconds=seconds,
        extra=dict(result.extra),
    )


def plan_counts(results: Iterable[RunResult]) -> tuple[int, int]:
    """The epoch plans of ``results`` (``mip`` runs) and how many of them were the greedy
    fallback, the solver having found no answer in time; ``(0, 0)`` for other schedulers."""
    plans = fallbacks = 0
    for r in results:
        plans += int(r.extra.get("plans") or 0)
        fallbacks += int(r.extra.get("fallbacks") or 0)
    return plans, fallbacks


def plan_words(plans: int, fallbacks: int) -> str:
    """One sentence on where a what-if's epoch plans came from (empty without plans)."""
    if not plans:
        return ""
    if not fallbacks:
        return f"All {plans:,} epoch plans of the runs are the solver's."
    return (
        f"Of the runs' {plans:,} epoch plans, {fallbacks:,} found no solver answer in time "
        "and are the greedy plan."
    )


# -- side-by-side frames ------------------------------------------------------------------


def _wait(summary: dict[str, Any], quantile: str, job_class: str) -> float:
    value = (summary.get(f"wait_{quantile}_s") or {}).get(job_class)
    return float(value) if value is not None else math.nan


def summary_frame(results: list[RunResult]) -> pd.DataFrame:
    """One row per result set with the headline metrics (numbers, for CSV and charts)."""
    rows = []
    for r in results:
        s = r.summary
        row: dict[str, Any] = {
            "variant": r.label,
            "policy": r.policy,
            "delivered_over_owed": s.get("delivered_over_owed"),
            "worst_project_delivered_over_owed": s.get("worst_project_delivered_over_owed"),
            "occupancy": s.get("occupancy"),
            "preemptions": s.get("preemptions"),
            "preempted_gpu_h": s.get("preempted_gpu_h"),
            "jain_index": s.get("jain_index"),
            "unallocated_share": s.get("unallocated_share"),
        }
        for q in ("p50", "p90", "p99"):
            for c in CLASSES:
                row[f"wait_{q}_s_{c}"] = _wait(s, q, c)
        row["simulation_seconds"] = round(r.seconds, 2)
        rows.append(row)
    return pd.DataFrame(rows)


def format_wait(seconds: float) -> str:
    """A wait in the unit a person would use: ``45 s``, ``12 min``, ``2.5 h``."""
    if seconds is None or math.isnan(seconds):
        return "n/a"
    if abs(seconds) < 90:
        return f"{seconds:.0f} s"
    if abs(seconds) < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _pct(value: Any) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{100 * float(value):.1f}%"


def summary_table(summary: pd.DataFrame) -> pd.DataFrame:
    """The headline metrics as rows in plain words, one column per result set."""
    lines: list[tuple[str, str, Any]] = [
        ("Delivered / owed GPU-hours, all projects", "pct", "delivered_over_owed"),
        ("Delivered / owed, worst project", "pct", "worst_project_delivered_over_owed"),
        ("Occupancy (GPUs busy / available)", "pct", "occupancy"),
        ("Free (unallocated) share of delivered", "pct", "unallocated_share"),
        ("Fairness (Jain index, 1 = even)", "num", "jain_index"),
        ("Preemptions (count)", "int", "preemptions"),
        ("GPU-hours lost to preemption", "num", "preempted_gpu_h"),
    ]
    for c in CLASSES:
        lines.append((f"Median wait, {c} jobs", "wait", f"wait_p50_s_{c}"))
        lines.append((f"p90 wait, {c} jobs", "wait", f"wait_p90_s_{c}"))
    lines.append(("Simulation time (s)", "num", "simulation_seconds"))
    out: dict[str, list[str]] = {"Metric": [name for name, _, _ in lines]}
    for _, row in summary.iterrows():
        cells = []
        for _, kind, column in lines:
            value = row.get(column)
            if value is None or (isinstance(value, float) and math.isnan(value)):
                cells.append("n/a")
            elif kind == "pct":
                cells.append(_pct(value))
            elif kind == "wait":
                cells.append(format_wait(float(value)))
            elif kind == "int":
                cells.append(f"{int(value):,}")
            else:
                cells.append(f"{float(value):,.2f}")
        out[str(row["variant"])] = cells
    return pd.DataFrame(out)


def jobs_frame(results: list[RunResult]) -> pd.DataFrame:
    """Every job of every result set: variant, class and wait (for the wait CDFs)."""
    return pd.concat(
        [r.jobs[["class", "wait_s", "started"]].assign(variant=r.label) for r in results],
        ignore_index=True,
    )


def occupancy_frame(results: list[RunResult]) -> pd.DataFrame:
    """Occupancy over time of every result set (long form)."""
    return pd.concat([r.occupancy.assign(variant=r.label) for r in results], ignore_index=True)


# -- program-first comparison, with the spread of the replicates -----------------------------

UNIT_METRICS = ("owed_gpu_h", "delivered_gpu_h", "delivered_within_owed_gpu_h", "wait_p90_s")


def unit_figures(scenario: Scenario, result: RunResult) -> pd.DataFrame:
    """One result set per org unit: owed, delivered and delivered-within-owed GPU-hours
    summed over the unit's projects, and the p90 wait over the unit's jobs.

    Each project's sums and waits are gathered once and added up the tree (a unit's
    figures are those of the projects at or under its path): filtering the tables per
    unit took 0.25 s a run on ai2-like's 60 units, and every redraw of a what-if's
    results compares six runs."""
    sums = ("owed_gpu_h", "delivered_gpu_h", "delivered_within_owed_gpu_h")
    projects = result.projects.groupby("project", sort=False)[list(sums)].sum()
    jobs = result.jobs
    waits: dict[str, np.ndarray] = {
        str(p): w.to_numpy(dtype=float)
        for p, w in jobs["wait_s"].groupby(jobs["project"], sort=False)
    }
    totals = {str(p): row for p, row in zip(projects.index, projects.to_numpy(dtype=float), strict=True)}
    rows = []
    for path, _unit in walk(scenario.org):
        prefix = path + "/"
        members = [p for p in totals if p == path or p.startswith(prefix)]
        added = np.sum([totals[p] for p in members], axis=0) if members else np.zeros(len(sums))
        mine = [waits[p] for p in members if p in waits]
        wait = np.concatenate(mine) if mine else np.empty(0)
        n_jobs = len(wait)
        wait = wait[~np.isnan(wait)]
        rows.append(
            {
                "unit": path,
                **{name: float(v) for name, v in zip(sums, added, strict=True)},
                "wait_p90_s": float(np.quantile(wait, 0.9)) if len(wait) else math.nan,
                "jobs": n_jobs,
            }
        )
    return pd.DataFrame(rows)


def separated(current: Sequence[float], edited: Sequence[float]) -> bool:
    """Whether two sets of replicates separate: every edited value lies above every
    current one, or below. With one replicate a side, any difference counts."""
    c = [v for v in current if not math.isnan(v)]
    e = [v for v in edited if not math.isnan(v)]
    if not c or not e:
        return False
    if len(c) == 1 and len(e) == 1:
        return abs(e[0] - c[0]) > 1e-9
    return min(e) > max(c) or max(e) < min(c)


def _spread(values: Sequence[float]) -> float:
    good = [v for v in values if not math.isnan(v)]
    if len(good) < 2:
        return 0.0
    mean = sum(good) / len(good)
    return math.sqrt(sum((v - mean) ** 2 for v in good) / (len(good) - 1))


def compare_units(
    scenario: Scenario, edited: Scenario, current_runs: Sequence[RunResult], edited_runs: Sequence[RunResult]
) -> pd.DataFrame:
    """Per org unit (tree order), the mean of each side's replicates, the change and its
    spread, and whether the change is within noise.

    The change of a figure is mean(edited) - mean(current). Its spread is the sample
    standard deviation, over replicates, of the paired changes (replicate r of both
    sides sees the same perturbed arrivals). A change is *within noise* when the two
    sides' replicates do not separate (:func:`separated`).
    """
    from app_streamlit.state import parent_percents

    pct_now = parent_percents(scenario)
    pct_new = parent_percents(edited)
    from models import effective_shares

    eff_now, eff_new = effective_shares(scenario.org), effective_shares(edited.org)
    per_side = {
        side: [unit_figures(scenario, r).set_index("unit") for r in runs]
        for side, runs in (("current", current_runs), ("edited", edited_runs))
    }
    rows = []
    for path, unit in walk(scenario.org):
        row: dict[str, Any] = {
            "unit": path,
            "program": path.split("/", 1)[0],
            "level": path.count("/"),
            "is_project": unit.is_project,
            "pct_parent_now": pct_now[path],
            "pct_parent_edited": pct_new[path],
            "pct_cluster_now": 100 * eff_now[path],
            "pct_cluster_edited": 100 * eff_new[path],
            "replicates": min(len(current_runs), len(edited_runs)),
        }
        for metric in UNIT_METRICS:
            c = [_num(f.at[path, metric]) for f in per_side["current"]]
            e = [_num(f.at[path, metric]) for f in per_side["edited"]]
            mc, me = _mean(c), _mean(e)
            paired = [b - a for a, b in zip(c, e, strict=False)]
            row[f"{metric}_now"] = mc
            row[f"{metric}_edited"] = me
            row[f"{metric}_change"] = me - mc
            row[f"{metric}_spread"] = _spread(paired)
            row[f"{metric}_separated"] = separated(c, e)
        rows.append(row)
    return pd.DataFrame(rows)


def _num(value: Any) -> float:
    return math.nan if value is None else float(value)


def _mean(values: Sequence[float]) -> float:
    good = [v for v in values if not math.isnan(v)]
    return sum(good) / len(good) if good else math.nan


def change_words(change: float, spread: float, base: float, separated_: bool, unit: str = "GPU-h") -> str:
    """``+707 GPU-h ± 120 (+5%)``, or ``+12 GPU-h ± 40, within noise``."""
    if math.isnan(change):
        return "n/a"
    text = f"{change:+,.0f} {unit}"
    if spread > 0:
        text += f" ± {spread:,.0f}"
    if base and not math.isnan(base) and abs(base) > 1e-9:
        text += f" ({100 * change / base:+.1f}%)"
    if not separated_:
        text += ", within noise"
    return text


def wait_change_words(change: float, spread: float, separated_: bool) -> str:
    """``p90 wait -40 min ± 10 min``, or ``..., within noise``."""
    if math.isnan(change):
        return "n/a"
    if abs(change) < 1.0:
        text = "unchanged"
    else:
        text = f"{'+' if change > 0 else '-'}{format_wait(abs(change))}"
        if spread > 0:
            text += f" ± {format_wait(spread)}"
    if not separated_:
        text += ", within noise"
    return text


def tree_table(units: pd.DataFrame, depth: int) -> pd.DataFrame:
    """The comparison as a tree table, program -> team -> project, down to ``depth``
    (0: programs only). Each row is its unit's subtotal: the sum over its projects."""
    shown = units[units["level"] <= depth]
    rows = []
    for u in shown.to_dict("records"):
        name = str(u["unit"]).rsplit("/", 1)[-1]
        rows.append(
            {
                "Org unit": ("\u2003" * int(u["level"])) + ("" if u["is_project"] else "▸ ") + name,
                "Change in delivered": change_words(
                    float(u["delivered_gpu_h_change"]), float(u["delivered_gpu_h_spread"]),
                    float(u["delivered_gpu_h_now"]), bool(u["delivered_gpu_h_separated"]),
                ),
                "Delivered GPU-h, edited": round(float(u["delivered_gpu_h_edited"])),
                "Owed GPU-h, edited": round(float(u["owed_gpu_h_edited"])),
                "Delivered within owed (capped), edited": round(float(u["delivered_within_owed_gpu_h_edited"])),
                "Change in p90 wait": wait_change_words(
                    float(u["wait_p90_s_change"]), float(u["wait_p90_s_spread"]),
                    bool(u["wait_p90_s_separated"]),
                ),
                "p90 wait, now → edited": f"{format_wait(float(u['wait_p90_s_now']))} → "
                f"{format_wait(float(u['wait_p90_s_edited']))}",
                "Share of parent, now → edited": f"{u['pct_parent_now']:.1f}% → {u['pct_parent_edited']:.1f}%",
                "Delivered GPU-h, now": round(float(u["delivered_gpu_h_now"])),
                "Owed GPU-h, now": round(float(u["owed_gpu_h_now"])),
                "Delivered within owed (capped), now": round(float(u["delivered_within_owed_gpu_h_now"])),
                "Path": u["unit"],
                "Within noise": not bool(u["delivered_gpu_h_separated"]),
            }
        )
    return pd.DataFrame(rows)


def mean_summary(runs: Sequence[RunResult], label: str) -> RunResult:
    """One result set standing for a side's replicates: numeric summary figures
    averaged, projects averaged, jobs and occupancy of all replicates pooled."""
    first = runs[0]
    summary: dict[str, Any] = {}
    for key, value in first.summary.items():
        if isinstance(value, Mapping):
            summary[key] = {
                k: _mean([_num((r.summary.get(key) or {}).get(k)) for r in runs]) for k in value
            }
        elif isinstance(value, int | float) and not isinstance(value, bool):
            summary[key] = _mean([_num(r.summary.get(key)) for r in runs])
        else:
            summary[key] = value
    projects = (
        pd.concat([r.projects for r in runs]).groupby("project", sort=False).mean(numeric_only=True).reset_index()
    )
    occupancy = pd.concat([r.occupancy for r in runs]).groupby("hours", sort=True).mean().reset_index()
    return RunResult(
        label=label,
        policy=first.policy,
        summary=summary,
        projects=projects,
        jobs=pd.concat([r.jobs for r in runs], ignore_index=True),
        occupancy=occupancy,
        seconds=sum(r.seconds for r in runs),
        replicate=-1,
    )


# -- downloads --------------------------------------------------------------------------------


def csv_with_metadata(frame: pd.DataFrame, metadata: Mapping[str, Any]) -> str:
    """A CSV whose first lines are ``# key: value`` comments saying where it came from
    (``pandas.read_csv(..., comment="#")`` skips them)."""
    header = "".join(f"# {k}: {v}\n" for k, v in metadata.items())
    return header + frame.to_csv(index=False)


def with_readable_waits(frame: pd.DataFrame) -> pd.DataFrame:
    """Every ``*_s`` wait column also in hours (``*_h``), next to it."""
    out = frame.copy()
    for column in list(out.columns):
        if "wait" in column and column.endswith("_s") or column.startswith("wait_") and "_s_" in column:
            position = list(out.columns).index(column) + 1
            name = column[:-2] + "_h" if column.endswith("_s") else column.replace("_s_", "_h_")
            out.insert(position, name, (pd.to_numeric(out[column], errors="coerce") / 3600.0).round(3))
    return out

"""What-if runs: simulate budgets, compare result sets, and say what changed in words.

A result set is one simulation of one scenario (current or edited budgets) under one
scheduler, reduced to the plain DataFrames the app shows (:class:`RunResult`, which
pickles, so ``st.cache_data`` can keep it). The simulator runs with its in-memory
ledger: nothing here writes to a live one.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

from models import Scenario

POLICIES = ("mip", "fairshare", "legacy")
POLICY_WORDS = {
    "mip": "gpuplan's epoch planner (mip)",
    "fairshare": "greedy fair share, the institute's design (fairshare)",
    "legacy": "the old priority scheduler (legacy)",
}
CLASSES = ("debug", "batch", "large", "all")


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


@dataclass(frozen=True)
class Request:
    """What the user asked to compare; results are stale when it changes."""

    key: str
    shares: tuple[tuple[str, float], ...]
    policy: str
    baselines: tuple[str, ...]
    days: float


@dataclass(frozen=True)
class RunSpec:
    """One simulation of a request: which budgets, under which scheduler, and its label."""

    label: str
    budgets: Literal["current", "edited"]
    policy: str


@dataclass(frozen=True)
class RunResult:
    """One result set, as plain data.

    ``projects``: project, owed_gpu_h, delivered_gpu_h, delivered_over_owed.
    ``projects``: also wait_p90_s and preemptions.
    ``jobs``: job, project, class, wait_s, started, preemptions.
    ``occupancy``: hours (start of each simulated hour), occupancy (busy / available, 0-1).
    """

    label: str
    policy: str
    summary: dict[str, Any]
    projects: pd.DataFrame
    jobs: pd.DataFrame
    occupancy: pd.DataFrame
    seconds: float


def runs_for(request: Request) -> list[RunSpec]:
    """The simulations a request needs: current and edited budgets, then any baselines."""
    tag = f" ({request.policy})" if request.baselines else ""
    runs = [
        RunSpec(f"current budgets{tag}", "current", request.policy),
        RunSpec(f"edited budgets{tag}", "edited", request.policy),
    ]
    runs += [RunSpec(f"edited budgets ({p})", "edited", p) for p in request.baselines]
    return runs


def run(scenario: Scenario, policy: str, days: float) -> RunResult:
    """Simulate ``scenario`` under ``policy`` for its first ``days`` and keep what the app shows."""
    from planner.simulator import simulate

    started = time.monotonic()
    result = simulate(scenario, policy, days=days)
    return from_simulation(result, policy, time.monotonic() - started)


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
    )


def labelled(result: RunResult, label: str) -> RunResult:
    """The same result set under another label (the cache is shared between labels)."""
    return dataclasses.replace(result, label=label)


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
        ("Share of delivered GPU-hours that were free (unallocated) work", "pct", "unallocated_share"),
        ("Fairness across projects (Jain index, 1 = perfectly even)", "num", "jain_index"),
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


def projects_frame(results: list[RunResult]) -> pd.DataFrame:
    """Per project and result set: owed and delivered GPU-hours, ratio, p90 wait (long form)."""
    frames = []
    for r in results:
        f = r.projects.copy()
        f.insert(0, "variant", r.label)
        f.insert(1, "policy", r.policy)
        frames.append(f)
    return pd.concat(frames, ignore_index=True)


def projects_table(projects: pd.DataFrame) -> pd.DataFrame:
    """Per project, one column group per result set, in plain words."""
    variants = list(dict.fromkeys(projects["variant"]))
    out = pd.DataFrame({"Project": list(dict.fromkeys(projects["project"]))})
    for v in variants:
        rows = projects[projects["variant"] == v].set_index("project")
        out[f"Owed GPU-h, {v}"] = out["Project"].map(rows["owed_gpu_h"]).round(1)
        out[f"Delivered GPU-h, {v}"] = out["Project"].map(rows["delivered_gpu_h"]).round(1)
        out[f"Delivered / owed, {v}"] = out["Project"].map(rows["delivered_over_owed"]).map(_pct)
        out[f"p90 wait, {v}"] = out["Project"].map(rows["wait_p90_s"]).map(format_wait)
    return out


def jobs_frame(results: list[RunResult]) -> pd.DataFrame:
    """Every job of every result set: variant, class and wait (for the wait CDFs)."""
    return pd.concat(
        [r.jobs[["class", "wait_s", "started"]].assign(variant=r.label) for r in results],
        ignore_index=True,
    )


def occupancy_frame(results: list[RunResult]) -> pd.DataFrame:
    """Occupancy over time of every result set (long form)."""
    return pd.concat([r.occupancy.assign(variant=r.label) for r in results], ignore_index=True)


# -- verdicts -----------------------------------------------------------------------------


def verdict(before: dict[str, float], after: dict[str, float]) -> str:
    """One line on what the edit did to a project, e.g. ``+12% delivered, p90 wait -40 min``.

    ``before`` and ``after`` hold ``delivered_gpu_h`` and ``wait_p90_s`` (NaN when the
    project had no job in the simulated period).
    """
    d0, d1 = before["delivered_gpu_h"], after["delivered_gpu_h"]
    if d0 > 0:
        change = 100.0 * (d1 - d0) / d0
        delivered = "delivered unchanged" if abs(change) < 0.5 else f"{change:+.0f}% delivered"
    elif d1 > 0:
        delivered = f"{d1:,.0f} GPU-h delivered (none before)"
    else:
        delivered = "nothing delivered either way"
    w0, w1 = before["wait_p90_s"], after["wait_p90_s"]
    if math.isnan(w0) or math.isnan(w1):
        wait = "p90 wait n/a"
    elif abs(w1 - w0) < 1.0:
        wait = "p90 wait unchanged"
    else:
        wait = f"p90 wait {'+' if w1 > w0 else '-'}{format_wait(abs(w1 - w0))}"
    return f"{delivered}, {wait}"


def verdicts(base: RunResult, edited: RunResult) -> pd.DataFrame:
    """Per project: the verdict line and the figures behind it (edited vs base)."""
    frame = projects_frame([base, edited])
    rows = []
    for project in dict.fromkeys(frame["project"]):
        pair = frame[frame["project"] == project].set_index("variant")
        b = pair.loc[base.label]
        e = pair.loc[edited.label]
        figures = [
            {"delivered_gpu_h": float(x["delivered_gpu_h"]), "wait_p90_s": float(x["wait_p90_s"])}
            for x in (b, e)
        ]
        rows.append(
            {
                "Project": project,
                "Verdict (edited vs current budgets)": verdict(figures[0], figures[1]),
                "Delivered GPU-h, current": round(float(b["delivered_gpu_h"]), 1),
                "Delivered GPU-h, edited": round(float(e["delivered_gpu_h"]), 1),
                "p90 wait, current": format_wait(float(b["wait_p90_s"])),
                "p90 wait, edited": format_wait(float(e["wait_p90_s"])),
            }
        )
    return pd.DataFrame(rows)

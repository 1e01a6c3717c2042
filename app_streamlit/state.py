"""Scenario loading and budget editing for the what-if app, free of Streamlit.

Everything here is a plain function of models and text, so the tests exercise the app's
logic without a browser. The app (``app_streamlit/app.py``) only lays these results out.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import yaml

from models import Scenario, effective_shares, walk, with_shares
from scenarios.errors import ScenarioError
from scenarios.load import bundled_scenarios, parse_scenario

HOUR = 3600.0
DAY = 86400.0

# Column names double as the labels a lab director reads; keep them plain, with units.
COL_UNIT = "Org unit"
COL_KIND = "Kind"
COL_SHARE = "Share (weight among siblings)"
COL_EFFECTIVE = "Effective share of the cluster (%)"
COL_GPUS = "H100-eq GPUs at that share"


@dataclass(frozen=True)
class LoadedScenario:
    """A scenario together with the text it came from.

    ``key`` fingerprints the source text, so caches keyed on it never mix two files that
    share a name; ``text`` is kept so that a download can edit the original file (and
    keep a ``generate:`` workload source) instead of inlining thousands of jobs.
    """

    key: str
    label: str
    text: str
    scenario: Scenario


def fingerprint(text: str) -> str:
    """A short, stable digest of a scenario's source text."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_bundled(name: str) -> LoadedScenario:
    """Load a scenario shipped with gpuplan by its name (``tiny``, ``ai2-like``...).

    Raises
    ------
    ScenarioError
        If there is no such bundled scenario or it does not validate.
    """
    bundled = bundled_scenarios()
    if name not in bundled:
        raise ScenarioError(name, f"no bundled scenario of that name (known: {', '.join(bundled)})")
    path = bundled[name]
    text = path.read_text()
    return LoadedScenario(
        key=fingerprint(text), label=f"{name} (bundled)", text=text, scenario=parse_scenario(text, path)
    )


def load_uploaded(filename: str, data: bytes) -> LoadedScenario:
    """Validate an uploaded scenario file.

    Relative paths inside it (a ``csv:`` workload) resolve against the app's working
    directory, since an upload has no folder of its own.

    Raises
    ------
    ScenarioError
        With the same message ``gpuplan validate`` prints: the file and the field path.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ScenarioError(filename, "not a text file (expected scenario YAML in UTF-8)") from None
    scenario = parse_scenario(text, filename)
    return LoadedScenario(key=fingerprint(text), label=f"{filename} (uploaded)", text=text, scenario=scenario)


def workload_days(scenario: Scenario) -> float:
    """Days from the start to the last job's end if it ran at once (at least one hour)."""
    ends = [j.submit + (j.duration or 0.0) for j in scenario.jobs]
    return max(max(ends, default=0.0), HOUR) / DAY


def default_days(scenario: Scenario) -> float:
    """The simulated period the app proposes: the whole workload, at most one day.

    Under ``mip`` one simulated day of the week-long ai2-like scenario takes a few
    minutes per run on a 2-core machine; the user may lengthen it.
    """
    return round(min(workload_days(scenario), 1.0), 2)


# -- cluster ------------------------------------------------------------------------------


def pools_table(scenario: Scenario) -> pd.DataFrame:
    """One row per pool (cluster, GPU type): nodes, GPUs, exchange rate, H100-eq capacity."""
    rows = []
    for cluster in scenario.clusters:
        for pool in cluster.pools():
            groups = [g for g in cluster.node_groups if g.gpu_type == pool.gpu_type]
            nodes = sum(g.nodes for g in groups)
            gpus = sum(g.nodes * g.gpus_per_node for g in groups)
            per_node = sorted({g.gpus_per_node for g in groups})
            rate = scenario.rate(pool.gpu_type)
            rows.append(
                {
                    "Cluster": pool.cluster,
                    "GPU type": pool.gpu_type,
                    "Nodes": nodes,
                    "GPUs per node": ", ".join(str(n) for n in per_node),
                    "GPUs": gpus,
                    "H100-eq per GPU": rate,
                    "Capacity (H100-eq GPUs)": gpus * rate,
                }
            )
    return pd.DataFrame(rows)


def maintenance_table(scenario: Scenario) -> pd.DataFrame:
    """Planned drains: which nodes, from when, for how long (hours)."""
    rows = []
    for m in scenario.maintenance:
        what = f"{m.nodes} node(s)" if m.nodes is not None else ", ".join(m.node_names or ())
        if m.gpu_type:
            what += f" of {m.gpu_type}"
        rows.append(
            {
                "Cluster": m.cluster,
                "Nodes drained": what,
                "Starts (h after start)": m.start / HOUR,
                "Lasts (h)": m.duration / HOUR,
            }
        )
    return pd.DataFrame(rows)


# -- org tree and shares --------------------------------------------------------------------


def share_table(scenario: Scenario) -> pd.DataFrame:
    """The org tree as rows (parents before children) with shares and effective shares."""
    eff = effective_shares(scenario.org)
    capacity = scenario.capacity_h100()
    rows = []
    for path, unit in walk(scenario.org):
        rows.append(
            {
                COL_UNIT: path,
                COL_KIND: "project" if unit.is_project else f"group of {len(unit.children)}",
                COL_SHARE: float(unit.share),
                COL_EFFECTIVE: round(100.0 * eff[path], 2),
                COL_GPUS: round(eff[path] * capacity, 1),
            }
        )
    return pd.DataFrame(rows)


def shares_from_table(scenario: Scenario, table: pd.DataFrame) -> dict[str, float]:
    """The shares the edited table changes, by org-unit path.

    Raises
    ------
    ScenarioError
        If a share is missing, not a number, or not above zero (the message names the unit).
    """
    current = {path: unit.share for path, unit in walk(scenario.org)}
    changed: dict[str, float] = {}
    for path, value in zip(table[COL_UNIT], table[COL_SHARE], strict=True):
        if path not in current:
            raise ScenarioError(None, f"unknown org unit {path!r} in the share table")
        try:
            share = float(value)
        except (TypeError, ValueError):
            raise ScenarioError(None, f"share of {path!r} must be a number, got {value!r}") from None
        if math.isnan(share) or share <= 0:
            raise ScenarioError(None, f"share of {path!r} must be greater than 0, got {value!r}")
        if share != current[path]:
            changed[str(path)] = share
    return changed


def shares_key(shares: Mapping[str, float]) -> tuple[tuple[str, float], ...]:
    """A hashable, order-independent form of share edits (for cache keys)."""
    return tuple(sorted(shares.items()))


def with_edited_shares(scenario: Scenario, shares: Mapping[str, float]) -> Scenario:
    """A copy of ``scenario`` whose org tree carries the edited shares.

    Only shares change, and ``with_shares`` builds (and so validates) each edited
    ``OrgUnit``; paths, projects and jobs are untouched, so the scenario-wide cross checks
    cannot fail and re-validating thousands of jobs would only cost time.
    """
    if not shares:
        return scenario
    return scenario.model_copy(update={"org": with_shares(scenario.org, dict(shares))})


def owed_gpu_hours(scenario: Scenario, days: float) -> dict[str, float]:
    """Each project's owed H100-eq GPU-hours over the first ``days``, hour by hour.

    Hour ``h`` contributes the hierarchical water-filling of capacity over the demand at
    the start of that hour (``planner.fairshare.owed_at``): a project is owed its share,
    capped by its own demand, plus what idle siblings leave over.
    """
    from planner.fairshare import owed_at

    hours = max(1, math.ceil(days * 24 - 1e-9))
    total = dict.fromkeys(scenario.projects, 0.0)
    for h in range(hours):
        for project, owed in owed_at(scenario, h * HOUR).items():
            total[project] = total.get(project, 0.0) + owed
    return total


def owed_comparison(current: Scenario, edited: Scenario, days: float) -> pd.DataFrame:
    """Per project: shares and owed GPU-hours under the current and the edited budgets."""
    eff_now = effective_shares(current.org)
    eff_new = effective_shares(edited.org)
    owed_now = owed_gpu_hours(current, days)
    owed_new = owed_gpu_hours(edited, days) if edited is not current else owed_now
    rows = []
    for project in current.projects:
        before, after = owed_now.get(project, 0.0), owed_new.get(project, 0.0)
        rows.append(
            {
                "Project": project,
                "Share now (%)": round(100 * eff_now[project], 2),
                "Share edited (%)": round(100 * eff_new[project], 2),
                "Owed now (GPU-h)": round(before, 1),
                "Owed edited (GPU-h)": round(after, 1),
                "Change (GPU-h)": round(after - before, 1),
                "Change (%)": round(100 * (after - before) / before, 1) if before > 0 else None,
            }
        )
    return pd.DataFrame(rows)


# -- download -----------------------------------------------------------------------------


def edited_scenario_yaml(loaded: LoadedScenario, shares: Mapping[str, float]) -> str:
    """The scenario file with the edited shares, as YAML text.

    The original mapping is edited in place, so a ``generate:`` (or ``csv:``) workload
    source stays a source rather than thousands of inlined jobs. Comments of the original
    file are lost (YAML round trips drop them); a header says what was edited.

    Raises
    ------
    ScenarioError
        If a path in ``shares`` is not a unit of the file's org tree.
    """
    data: Any = yaml.safe_load(loaded.text)
    remaining = dict(shares)
    _set_shares(data["org"], "", remaining)
    if remaining:
        raise ScenarioError(loaded.label, f"unknown org unit(s): {', '.join(sorted(remaining))}")
    current = {path: unit.share for path, unit in walk(loaded.scenario.org)}
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    header = [f"# {loaded.scenario.name}: budgets edited in the gpuplan what-if app, {stamp}."]
    header += [f"#   {p}: share {current[p]:g} -> {s:g}" for p, s in sorted(shares.items())]
    body: str = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)
    return "\n".join(header) + "\n" + body


def _set_shares(units: list[dict[str, Any]], prefix: str, remaining: dict[str, float]) -> None:
    for unit in units:
        path = f"{prefix}{unit['name']}"
        if path in remaining:
            unit["share"] = remaining.pop(path)
        _set_shares(unit.get("children") or [], path + "/", remaining)

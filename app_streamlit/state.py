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


def scenario_digest(scenario: Scenario) -> str:
    """A digest of the scenario as parsed (its jobs included): unlike :func:`fingerprint`,
    it changes when a trace or CSV the text names changes."""
    return hashlib.sha256(scenario.model_dump_json().encode()).hexdigest()[:16]


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
    """The simulated period the app proposes: whole days up to and including the hour
    where the submitted work most exceeds the cluster (:func:`busiest_hour`), at least
    one day, at most a week and the workload's span.

    So the default lands on a contended period (a quiet one changes nothing whatever
    the budgets), and stays short where the contention comes early: under ``mip`` a
    simulated day of ai2-like takes minutes per run on a 2-core machine.
    """
    peak = busiest_hour(demand_profile(scenario))
    days = max(1.0, math.ceil((peak + 1) / 24))
    return float(round(min(workload_days(scenario), days, 7.0), 2))


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


# -- editing in percentages of the parent -------------------------------------------------

ROOT = ""
"""The group of the programs (children of the whole cluster)."""


def sibling_groups(scenario: Scenario) -> dict[str, list[str]]:
    """Each group of siblings a director can split: parent path -> its children's paths.

    ``ROOT`` (``""``) holds the programs; every unit with children holds its own.
    """
    groups: dict[str, list[str]] = {ROOT: [u.name for u in scenario.org]}
    for path, unit in walk(scenario.org):
        if unit.children:
            groups[path] = [f"{path}/{c.name}" for c in unit.children]
    return groups


def group_label(group: str) -> str:
    """``"programs (split of the whole cluster)"`` or ``"teams of language"``..."""
    if group == ROOT:
        return "programs: split of the whole cluster"
    depth = group.count("/")
    kind = "teams" if depth == 0 else "projects"
    return f"{kind} of {group}: split of {group}"


def parse_percent(text: Any, *, siblings: int) -> float:
    """A percentage as a director types it: ``22``, ``22.5``, ``22 %`` or ``22%``.

    Raises
    ------
    ValueError
        With the sentence the page shows: not a number, not above 0, or (when the unit
        has siblings) not below 100 (its siblings would get nothing).
    """
    raw = str(text).strip()
    number = raw[:-1].strip() if raw.endswith("%") else raw
    try:
        value = float(number.replace(",", "."))
    except ValueError:
        raise ValueError(f"{raw!r} is not a percentage: type a number such as 22 or 22.5") from None
    if math.isnan(value) or value <= 0:
        raise ValueError(f"{raw!r}: a share must be above 0 %")
    if siblings > 1 and value >= 100:
        raise ValueError(f"{raw!r}: must be below 100 %, or its siblings would get nothing")
    if value > 100:
        raise ValueError(f"{raw!r}: a share cannot be above 100 %")
    return value


def parent_percents(scenario: Scenario, shares: Mapping[str, float] | None = None) -> dict[str, float]:
    """Every unit's share of its parent in percent (the edited shares applied)."""
    edited = with_edited_shares(scenario, dict(shares or {}))
    out: dict[str, float] = {}
    for children in sibling_groups(edited).values():
        weights = {p: _unit(edited, p).share for p in children}
        total = sum(weights.values())
        out.update({p: 100.0 * w / total for p, w in weights.items()})
    return out


def _unit(scenario: Scenario, path: str) -> Any:
    for p, unit in walk(scenario.org):
        if p == path:
            return unit
    raise KeyError(path)


@dataclass(frozen=True)
class GroupEdit:
    """The weights one sibling group gets from the percentages typed into it.

    ``shares``: new weight per child (all children of the group). ``rescaled``: the
    children whose percentage follows from the others (so the group sums to 100 %).
    ``note``: a sentence for the page when the typed percentages were rescaled.
    """

    shares: dict[str, float]
    rescaled: tuple[str, ...]
    note: str | None = None


def edit_group(scenario: Scenario, children: list[str], typed: Mapping[str, float]) -> GroupEdit:
    """Give each child in ``typed`` its percentage of the parent; rescale the others.

    The children not typed keep their proportions among themselves and share what is
    left (100 % minus the typed ones), so the group always sums to 100 %. The group's
    total weight is kept, so weights stay of the size the scenario file uses. When every
    child is typed and they do not sum to 100 %, all are scaled to sum to 100 % and the
    note says so.

    Raises
    ------
    ValueError
        When the typed percentages leave nothing (100 % or more) for untyped siblings.
    """
    weights = {p: float(_unit(scenario, p).share) for p in children}
    total = sum(weights.values())
    pinned = {p: float(v) for p, v in typed.items() if p in weights}
    free = [p for p in children if p not in pinned]
    used = sum(pinned.values())
    note = None
    if free:
        if used >= 100.0 - 1e-9:
            raise ValueError(
                f"the percentages typed here add up to {used:g} %, which leaves nothing for "
                + ", ".join(p.rsplit("/", 1)[-1] for p in free)
            )
        rest = sum(weights[p] for p in free)
        fractions = {p: v / 100.0 for p, v in pinned.items()}
        fractions.update({p: (1.0 - used / 100.0) * weights[p] / rest for p in free})
    else:
        fractions = {p: v / used for p, v in pinned.items()}
        if abs(used - 100.0) > 1e-6:
            note = f"the percentages typed here add up to {used:g} %, so each was scaled to make 100 %"
    shares = {p: round(fractions[p] * total, 6) for p in children}
    return GroupEdit(shares=shares, rescaled=tuple(free), note=note)


def shares_from_percents(
    scenario: Scenario, typed: Mapping[str, Mapping[str, float]]
) -> tuple[dict[str, float], dict[str, str]]:
    """The share edits of every group's typed percentages, and per group any problem.

    ``typed``: group -> {child path: percentage}. A group whose percentages cannot be
    used is left as it is and its sentence returned in the second mapping.
    """
    groups = sibling_groups(scenario)
    current = {path: float(unit.share) for path, unit in walk(scenario.org)}
    shares: dict[str, float] = {}
    problems: dict[str, str] = {}
    for group, values in typed.items():
        if group not in groups or not values:
            continue
        try:
            edit = edit_group(scenario, groups[group], values)
        except ValueError as exc:
            problems[group] = str(exc)
            continue
        for path, weight in edit.shares.items():
            if abs(weight - current[path]) > 1e-9 * max(1.0, current[path]):
                shares[path] = weight
    return shares, problems


def program_of(path: str) -> str:
    """The program (top-level unit) a unit path belongs to."""
    return path.split("/", 1)[0]


#: What an allocation column means, from :func:`allocation_table` (both tables that show one).
ALLOCATION_WORDS = (
    "The unit's share of the whole cluster over the simulated period, before demand caps "
    "it: what it would get if its work could use all of it. What a unit is *owed* is this, "
    "capped hour by hour by its demand (the what-if shows it)."
)


def allocation_table(current: Scenario, edited: Scenario, days: float) -> pd.DataFrame:
    """Per org unit: share of the parent and of the cluster, now and edited, and the
    H100-eq GPU-hours that share of the cluster is over the period (the *allocation*,
    before demand caps it into what is *owed*)."""
    pct_now = parent_percents(current)
    pct_new = parent_percents(edited)
    eff_now = effective_shares(current.org)
    eff_new = effective_shares(edited.org)
    hours = current.capacity_h100() * days * 24
    rows = []
    for path, unit in walk(current.org):
        rows.append(
            {
                "unit": path,
                "level": path.count("/"),
                "kind": "project" if unit.is_project else ("program" if "/" not in path else "team"),
                "pct_parent_now": pct_now[path],
                "pct_parent_edited": pct_new[path],
                "pct_cluster_now": 100 * eff_now[path],
                "pct_cluster_edited": 100 * eff_new[path],
                "allocation_now_gpu_h": eff_now[path] * hours,
                "allocation_edited_gpu_h": eff_new[path] * hours,
            }
        )
    return pd.DataFrame(rows)


# -- where the workload is contended --------------------------------------------------------


def demand_profile(scenario: Scenario) -> pd.DataFrame:
    """Hour by hour, the H100-eq GPUs the submitted work asks for against the capacity.

    Demand counts each job from its submission until it would end if it started at once
    (no queue): a lower bound of the contention a scheduler meets, and cheap.
    """
    capacity = scenario.capacity_h100()
    hours = max(1, math.ceil(workload_days(scenario) * 24))
    demand = [0.0] * (hours + 1)
    from planner.fairshare import job_rate

    for job in scenario.jobs:
        rate = job_rate(scenario.gpu_types, job)
        start = int(job.submit // HOUR)
        end = min(hours, math.ceil((job.submit + (job.duration or 0.0)) / HOUR))
        for h in range(start, max(start + 1, end)):
            if h <= hours:
                demand[h] += job.gpus * rate
    return pd.DataFrame(
        {"hour": range(hours + 1), "demand": demand, "capacity": [capacity] * (hours + 1)}
    )


def contended_hours(profile: pd.DataFrame, start_h: float, days: float) -> tuple[int, int]:
    """Hours of ``[start_h, start_h + days)`` whose demand exceeds capacity, and how many."""
    window = profile[(profile["hour"] >= start_h) & (profile["hour"] < start_h + days * 24)]
    return int((window["demand"] > window["capacity"]).sum()), len(window)


def busiest_hour(profile: pd.DataFrame, epoch_h: float = 1.0) -> float:
    """The epoch-aligned hour of most demand over capacity (the plan view's default)."""
    if not len(profile):
        return 0.0
    ratio = profile["demand"] / profile["capacity"].where(profile["capacity"] > 0)
    hour = float(profile["hour"].to_numpy()[int(ratio.fillna(0).to_numpy().argmax())])
    return math.floor(hour / epoch_h) * epoch_h

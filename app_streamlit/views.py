"""The app's pages: Streamlit layout over the plain functions of ``state``, ``whatif``,
``planview``, ``progress`` and ``charts``.

Every failure a user can cause (a bad file, a bad share, a solver or simulator error) is
shown as a sentence on the page, never as a traceback.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import os
import threading
from collections.abc import Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import streamlit as st

from app_streamlit import charts, planview, state
from app_streamlit.run_cache import RunCache
from app_streamlit.state import LoadedScenario
from app_streamlit.warmup import Warmup
from models import Plan, Scenario, walk
from scenarios.errors import ScenarioError
from scenarios.load import bundled_scenarios

UPLOAD = "Upload a scenario file"
ROW_PX = 35  # Streamlit's table row height
WORKERS_ENV = "GPUPLAN_APP_WORKERS"
"""Worker processes of the app's local Dask cluster (default: the CPU count; 0: run the
replicates one by one in the app's own process)."""
SCHEDULER_ENV = "GPUPLAN_DASK_SCHEDULER"
"""Address of an existing Dask scheduler (``tcp://host:8786``) to run the replicates on."""
TYPED = "typed_percents"
"""Session key: {scenario key: {group: {child path: typed text}}}."""
DEPTHS = {"programs": 0, "programs and teams": 1, "programs, teams and projects": 2}


def _full_height(table: pd.DataFrame, most: int = 60) -> int:
    """Pixel height showing up to ``most`` rows of ``table`` without inner scrolling."""
    return ROW_PX * (min(len(table), most) + 1) + 3


def _available(module: str) -> bool:
    """Whether a planner module is installed (without importing its heavy dependencies)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


# -- cached work (keys are hashable: a source fingerprint, sorted share edits, numbers) ----
# Arguments with a leading underscore are not hashed; the key arguments before them
# determine them completely.


@st.cache_resource(show_spinner="Loading the scenario...", max_entries=8)
def _load_bundled(name: str, mtime: float) -> LoadedScenario:
    del mtime  # part of the key only: an edited bundled file reloads
    return state.load_bundled(name)


@st.cache_resource(show_spinner="Checking the uploaded file...", max_entries=8)
def _load_uploaded(filename: str, digest: str, _data: bytes) -> LoadedScenario:
    del digest
    return state.load_uploaded(filename, _data)


@st.cache_data(show_spinner=False, max_entries=8)
def _profile(key: str, _scenario: Scenario) -> pd.DataFrame:
    del key
    return state.demand_profile(_scenario)


@st.cache_resource(show_spinner=False)
def _results() -> RunCache:
    """Finished runs of every session, by (scenario, budgets, scheduler, period,
    replicate), also on disk for the next app process (:mod:`app_streamlit.run_cache`)."""
    return RunCache.from_environment()


@st.cache_data(show_spinner=False, max_entries=8)
def _digest(key: str, _scenario: Scenario) -> str:
    del key
    return state.scenario_digest(_scenario)


@st.cache_resource(show_spinner=False)
def _seconds_per_hour() -> dict[tuple[str, str], float]:
    """Wall seconds per simulated hour of one run, by (scenario, scheduler): estimates."""
    return {}


def _connect(scheduler: str | None, workers: int) -> Any:
    """A client of the existing cluster at ``scheduler``, of a new local cluster of
    ``workers`` processes, or ``None`` (``workers`` 0: run in the app process)."""
    dd: Any = importlib.import_module("distributed")  # untyped: go through Any
    if scheduler:
        return dd.Client(scheduler, timeout="10s")
    if workers <= 0:
        return None
    from app_streamlit.whatif import WORKER_PRELOAD
    from scenarios.sweep import start_local_cluster

    return dd.Client(start_local_cluster(workers, preload=WORKER_PRELOAD))


#: Per (scheduler, workers): the connection of this app process, made once, in the
#: background (:func:`_start_dask`).
_CLIENTS: dict[tuple[str | None, int], Future[Any]] = {}
_CLIENTS_LOCK = threading.Lock()
#: The thread the connections are made in (an error is kept in the future, for
#: whoever waits for the client).
_CONNECTOR = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dask-connect")


def _start_dask(scheduler: str | None, workers: int) -> Future[Any]:
    """Connect, or start the local cluster, in a background thread, once per app process
    (again after a failure). The what-if page asks for it as it is drawn, so the first
    **Run what-if** need not wait for the cluster: in Chromium on 2 cores, the start took
    2.8 s of a fresh what-if's first 10.2 s; started with the page (5.6 s, beside the
    page's own work), a browser driven to press Run 4 s after the page was drawn waited
    1.3 s for it, and one pressed later waits for none."""
    key = (scheduler, workers)
    with _CLIENTS_LOCK:
        started = _CLIENTS.get(key)
        if started is not None and not (started.done() and started.exception() is not None):
            return started
        future = _CLIENTS[key] = _CONNECTOR.submit(_connect, scheduler, workers)
        return future


def _dask(scheduler: str | None, workers: int) -> Any:
    """The client the replicates run on: an existing cluster, a local one, or none; made
    once per app process (:func:`_start_dask`)."""
    future = _start_dask(scheduler, workers)
    if not future.done():
        with st.spinner("Starting the local Dask cluster..."):
            return future.result()
    return future.result()


def _forget_dask() -> None:
    """Drop the connections made so far (tests that close their cluster)."""
    with _CLIENTS_LOCK:
        _CLIENTS.clear()


#: The current side's runs, started as the what-if page is drawn (:func:`_warm_current`).
_WARMUP = Warmup()


def _cache_key(loaded: LoadedScenario, request: Any, stage: str, point: Any) -> tuple[Any, ...]:
    """Where a run's result is kept: the current side's runs are the same for every edit.
    The scenario is named by its text and by its content (a trace it reads may change
    while its text does not, and the key outlives the app process)."""
    from app_streamlit import whatif

    side_shares = request.shares if point.budgets == "edited" else ()
    return (loaded.key, side_shares, stage, request.days, point.replicate, whatif.JITTER_S,
            _digest(loaded.key, loaded.scenario))


def _warm_current(loaded: LoadedScenario, request: Any) -> list[Any]:
    """Start the current side's runs of the request's first stage in the background, on
    the Dask cluster only (in the app's own process they would slow the page down); the
    runs started (:mod:`app_streamlit.warmup`)."""
    from app_streamlit import whatif

    scheduler = os.environ.get(SCHEDULER_ENV) or None
    if scheduler is None and _workers() <= 0:
        return []
    stage = whatif.stages(str(request.policy))[0]
    policy, options = whatif.stage_run(stage)
    points = [p for p in whatif.points_for(policy, request.replicates) if p.budgets == "current"]
    connection = _start_dask(scheduler, _workers())
    s, key = loaded.scenario, loaded.key

    def batch(todo: list[Any], on_point: Any, on_hours: Any) -> None:
        client = connection.result()
        if client is None:
            raise RuntimeError("no Dask cluster to run on")
        whatif.run_points(
            s, todo, {}, request.days, fingerprint=key, client=client,
            on_point=on_point, on_hours=on_hours, options=options,
        )

    keys = {p: _cache_key(loaded, request, stage, p) for p in points}  # here: not in the warm-up's thread
    return _WARMUP.start(points, keys.__getitem__, _results(), batch)


def _forget_warmup() -> None:
    """A fresh warm-up (tests that close their cluster)."""
    global _WARMUP
    _WARMUP = Warmup()


def _workers() -> int:
    try:
        return int(os.environ.get(WORKERS_ENV, os.cpu_count() or 1))
    except ValueError:
        return os.cpu_count() or 1


@st.cache_data(show_spinner=False, max_entries=16)
def _plan(key: str, shares: tuple[tuple[str, float], ...], hours: float, _scenario: Scenario) -> Plan:
    del key, shares
    return planview.plan_epoch_at(_scenario, hours * state.HOUR)


# -- sidebar ----------------------------------------------------------------------------------


def sidebar() -> tuple[LoadedScenario, float] | None:
    """Scenario choice and simulated period; ``None`` when no valid scenario is loaded."""
    bar = st.sidebar
    bar.title("gpuplan what-if")
    bar.caption(
        "Try GPU budgets on a copy of the cluster and its workload before deciding them. "
        "Nothing here changes the live system or its usage ledger."
    )
    bundled = bundled_scenarios()
    names = [*bundled, UPLOAD]
    default = names.index("ai2-like") if "ai2-like" in names else 0
    choice = bar.selectbox("Scenario", names, index=default, key="scenario_choice")
    try:
        if choice == UPLOAD:
            upload = bar.file_uploader("Scenario file (YAML)", type=["yaml", "yml"], key="upload")
            if upload is None:
                st.info("Upload a scenario file (YAML, as `gpuplan validate` accepts) in the sidebar.")
                return None
            data = upload.getvalue()
            loaded = _load_uploaded(upload.name, state.fingerprint(data.decode("utf-8", "replace")), data)
        else:
            loaded = _load_bundled(choice, bundled[choice].stat().st_mtime)
    except ScenarioError as exc:
        st.error("This file is not a valid scenario. The first problem found:")
        st.code(str(exc), language=None, wrap_lines=True)
        return None
    except Exception as exc:  # a loader bug must still not show a traceback
        st.error(f"The scenario could not be loaded: {type(exc).__name__}: {exc}")
        return None
    s = loaded.scenario
    span = state.workload_days(s)
    days = bar.number_input(
        "Simulated period (days)",
        min_value=1 / 24,
        max_value=float(math.ceil(span)),
        value=state.default_days(s),
        step=0.5,
        format="%.2f",
        key=f"days::{loaded.key}",
        help=f"How much of the workload to simulate, from its start. The whole workload spans "
        f"{span:.1f} days; a shorter period gives answers sooner.",
    )
    profile = _profile(loaded.key, s)
    busy, hours = state.contended_hours(profile, 0.0, float(days))
    if hours and busy / hours < 0.1:
        peak = state.busiest_hour(profile)
        bar.warning(
            f"This period is quiet: demand exceeds the cluster in {busy} of its {hours} hours, "
            "so budgets change little. The busiest hour is hour "
            f"{peak:g}: simulate at least {math.ceil((peak + 24) / 24)} days to include it."
        )
    else:
        bar.caption(f"Demand exceeds the cluster in {busy} of the period's {hours} hours.")
    bar.caption(
        "GPU-hours are H100-equivalents: an hour of a GPU counts its type's exchange rate "
        + ", ".join(f"({t} = {g.rate:g})" for t, g in s.gpu_types.items())
        + "."
    )
    return loaded, float(days)


# -- editing shares in percentages ------------------------------------------------------------


def _typed(loaded: LoadedScenario) -> dict[str, dict[str, str]]:
    store: dict[str, dict[str, dict[str, str]]] = st.session_state.setdefault(TYPED, {})
    return store.setdefault(loaded.key, {})


def _parsed(loaded: LoadedScenario) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    """Every group's typed percentages that parse, and per unit path the message of any
    that do not."""
    groups = state.sibling_groups(loaded.scenario)
    good: dict[str, dict[str, float]] = {}
    bad: dict[str, str] = {}
    for group, typed in _typed(loaded).items():
        siblings = len(groups.get(group, []))
        for path, text in typed.items():
            try:
                good.setdefault(group, {})[path] = state.parse_percent(text, siblings=siblings)
            except ValueError as exc:
                bad[path] = str(exc)
    return good, bad


def current_edits(loaded: LoadedScenario) -> tuple[dict[str, float], dict[str, str], dict[str, str]]:
    """The share edits of the typed percentages, the unit messages and the group messages."""
    good, bad = _parsed(loaded)
    shares, problems = state.shares_from_percents(loaded.scenario, good)
    return shares, bad, problems


def _on_type(loaded_key: str, group: str, path: str, widget: str) -> None:
    store = st.session_state.setdefault(TYPED, {}).setdefault(loaded_key, {})
    text = str(st.session_state.get(widget, "")).strip()
    if text:
        store.setdefault(group, {})[path] = text
    else:
        store.get(group, {}).pop(path, None)


def share_editor(loaded: LoadedScenario) -> dict[str, float]:
    """Percentages of the parent, one sibling group at a time; returns the share edits."""
    s = loaded.scenario
    groups = state.sibling_groups(s)
    st.subheader("1. Change the shares")
    st.markdown(
        "Type a unit's new **percentage of its parent** (a program's percentage of the "
        "whole cluster, a team's of its program...). The units you leave blank in the "
        "same group keep their proportions and are **rescaled so the group makes 100 %**."
    )
    group = st.selectbox(
        "Split to edit",
        list(groups),
        format_func=state.group_label,
        key=f"group::{loaded.key}",
    )
    before = state.parent_percents(s)
    shares, bad, problems = current_edits(loaded)
    after = state.parent_percents(s, shares)
    from models import effective_shares

    eff = effective_shares(state.with_edited_shares(s, shares).org)
    typed = _typed(loaded).get(group, {})
    head = st.columns([3, 2, 4])
    head[0].markdown("**Unit** (share now)")
    head[1].markdown("**New % of parent**")
    head[2].markdown("**Result**")
    for path in groups[group]:
        name = path.rsplit("/", 1)[-1]
        widget = f"pct::{loaded.key}::{path}"
        if widget not in st.session_state:
            st.session_state[widget] = typed.get(path, "")
        row = st.columns([3, 2, 4], vertical_alignment="center")
        row[0].markdown(f"**{name}** ({before[path]:.1f} %)")
        row[1].text_input(
            f"New percentage for {path}",
            key=widget,
            placeholder=f"{before[path]:.1f}",
            label_visibility="collapsed",
            on_change=_on_type,
            args=(loaded.key, group, path, widget),
            help="A number, e.g. 22 or 22.5 (a % sign is fine). Leave blank to rescale.",
        )
        with row[2]:
            if path in bad:
                st.error(f"{name}: {bad[path]}", icon="⚠️")
            elif group in problems:
                st.error(problems[group], icon="⚠️")
            else:
                change = after[path] - before[path]
                verb = "typed" if path in typed else ("rescaled" if abs(change) > 0.005 else "unchanged")
                st.markdown(
                    f"{after[path]:.1f} % of parent ({change:+.1f} points, {verb}) · "
                    f"{100 * eff[path]:.2f} % of the cluster"
                )
    if typed and group not in problems and not any(p in bad for p in groups[group]):
        rescaled = [p.rsplit("/", 1)[-1] for p in groups[group] if p not in typed]
        message = "Applied: " + ", ".join(
            f"{p.rsplit('/', 1)[-1]} {before[p]:.1f} % → {after[p]:.1f} %" for p in groups[group] if p in typed
        )
        if rescaled:
            message += f". Rescaled to keep 100 %: {', '.join(rescaled)}."
        st.success(message)
    other = [g for g in _typed(loaded) if g != group and _typed(loaded)[g]]
    if other:
        st.caption("Also edited: " + "; ".join(state.group_label(g) for g in other))
    if st.button("Reset every share", key="reset_shares", disabled=not _typed(loaded)):
        st.session_state[TYPED][loaded.key] = {}
        for path in [p for children in groups.values() for p in children]:
            st.session_state.pop(f"pct::{loaded.key}::{path}", None)
        st.rerun()
    return shares


# -- page 1: the what-if, program first --------------------------------------------------------

LAYOUT_CSS = """
<style>
/* Below about 1000 px the comparison column comes first and everything stacks. */
@media (max-width: 1000px) {
  .st-key-whatif_top [data-testid="stHorizontalBlock"]:has(> [data-testid="stColumn"] .st-key-results) {
    flex-direction: column-reverse;
  }
  .st-key-whatif_top [data-testid="stColumn"]:has(.st-key-results),
  .st-key-whatif_top [data-testid="stColumn"]:has(.st-key-editor) {
    width: 100% !important; flex: 1 1 100% !important; min-width: 100% !important;
  }
}
[data-testid="stMetricValue"] { font-size: 1.8rem; }
</style>
"""


def whatif_page(loaded: LoadedScenario, days: float) -> dict[str, float]:
    """Edit shares beside the programs' answer, then drill down; returns the share edits."""
    s = loaded.scenario
    st.html(LAYOUT_CSS)
    st.header(f"Scenario {s.name}: what if the budgets change?")
    st.markdown(
        f"**{sum(n.gpus for n in s.nodes):,} GPUs** ({s.capacity_h100():,.0f} H100-eq) · "
        f"**{len(s.org)} programs**, {len(s.projects)} projects · {len(s.jobs):,} jobs over "
        f"{state.workload_days(s):.1f} days · simulating the first **{days:g} days**"
    )
    if s.budget_revisions:
        st.info(
            f"This scenario revises budgets {len(s.budget_revisions)} time(s) later on; "
            "your edits change the starting shares, and those revisions still apply."
        )
    with st.container(key="whatif_top"):
        left, right = st.columns([5, 7], gap="medium")
    below = st.container()
    if _available("planner.simulator"):
        # Ready by the time the director has edited a share and pressed Run.
        _start_dask(os.environ.get(SCHEDULER_ENV) or None, _workers())
    with left, st.container(key="editor"):
        edits = share_editor(loaded)
        request = _controls(loaded, days, edits)
    if request is not None:
        _warm_current(loaded, request)
    with right, st.container(key="results"):
        if request is None:
            _programs_before_after(s, edits, days)
            return edits
        if _run_or_show(loaded, request, below) is None:
            _programs_before_after(s, edits, days)
    return edits


def _programs_before_after(s: Scenario, edits: dict[str, float], days: float) -> None:
    """Before any result: each program's share of the cluster now and edited."""
    st.subheader("Programs: share of the cluster")
    alloc = state.allocation_table(s, state.with_edited_shares(s, edits), days)
    programs = alloc[alloc["level"] == 0]
    st.dataframe(
        pd.DataFrame(
            {
                "Program": programs["unit"],
                "Share of the cluster now (%)": programs["pct_cluster_now"].round(1),
                "Share edited (%)": programs["pct_cluster_edited"].round(1),
                "Change (points)": (programs["pct_cluster_edited"] - programs["pct_cluster_now"]).round(1),
                "Allocation, edited (GPU-h)": programs["allocation_edited_gpu_h"].round(0),
            }
        ),
        hide_index=True,
        key="programs_table",
        column_config={
            "Allocation, edited (GPU-h)": st.column_config.NumberColumn(
                format="localized",
                help=state.ALLOCATION_WORDS,
            )
        },
    )
    st.caption("Run the what-if to see each program's owed and delivered GPU-hours and waits.")


def _controls(loaded: LoadedScenario, days: float, edits: dict[str, float]) -> Any:
    """Scheduler, replicates and the Run button; the request (``None``: no simulator)."""
    from app_streamlit import whatif

    st.subheader("2. Simulate current against edited budgets")
    if not _available("planner.simulator"):
        st.warning("What-if runs need the simulator (planner.simulator), which is not installed.")
        return None
    policies = whatif.available_policies()
    if not policies:
        st.warning("No scheduler policy of the simulator is installed.")
        return None
    policy = st.selectbox(
        "Scheduler",
        policies,
        format_func=lambda p: whatif.POLICY_WORDS[p],
        key="policy",
        help="The scheduler both budget sets are simulated under. Under mip, a fairshare "
        "preview comes first and the mip answer replaces it when ready.",
    )
    replicates = st.number_input(
        "Replicates per side",
        min_value=1,
        max_value=8,
        value=whatif.DEFAULT_REPLICATES,
        step=1,
        key="replicates",
        help="Each side runs this many times with arrival times moved by up to 30 min "
        "(one seed per replicate), so a change can be told from the noise.",
    )
    if not edits:
        st.info("You have not changed any share yet, so both sides will be the same.")
    request = whatif.Request(
        key=loaded.key, shares=state.shares_key(edits), policy=policy,
        days=days, replicates=int(replicates),
    )
    if st.button("Run what-if", type="primary", key="run_whatif"):
        st.session_state["whatif_todo"] = request
    return request


def _run_or_show(loaded: LoadedScenario, request: Any, below: Any) -> Any:
    """Run what is still to run (preview first), or show the stored results."""
    s = loaded.scenario
    todo = st.session_state.get("whatif_todo")
    stored = st.session_state.get("whatif")
    if todo is not None and todo.key == loaded.key:
        stage = _next_stage(todo, stored)
        if stage is not None:
            if stored is not None and stored[0] == todo:
                _show_results(s, stored, below, final=False)
            if _run_stage(loaded, todo, stage):
                st.rerun()
            return stored
        st.session_state.pop("whatif_todo", None)
    if stored is None or stored[0].key != loaded.key:
        return None
    if stored[0] != request:
        st.warning(
            "These results are for earlier settings (budgets, scheduler, period or "
            "replicates). Press **Run what-if** to update them."
        )
    _show_results(s, stored, below, final=True)
    return stored


def _next_stage(request: Any, stored: Any) -> str | None:
    """The stage still to run for ``request`` (:func:`app_streamlit.whatif.stages`):
    under mip, the fairshare preview, then the quick mip answer, then mip."""
    from app_streamlit import whatif

    order = whatif.stages(str(request.policy))
    done = stored[1] if stored is not None and stored[0] == request else None
    if done not in order:
        return order[0]
    at = order.index(done) + 1
    return order[at] if at < len(order) else None


def _run_stage(loaded: LoadedScenario, request: Any, stage: str) -> bool:
    """Run both sides' replicates of ``stage``; store the result; True when done."""
    from app_streamlit import whatif
    from app_streamlit.progress import RunProgress

    s = loaded.scenario
    shares = dict(request.shares)
    policy, options = whatif.stage_run(stage)
    points = whatif.points_for(policy, request.replicates)
    cache = _results()

    # Made here, read in the callbacks too.
    cache_key = {p: _cache_key(loaded, request, stage, p) for p in points}.__getitem__

    # A warm-up still waiting for an earlier one (another period, say) would run some of
    # these points a second time, beside this run: it is dropped (first, so that one
    # starting meanwhile is seen below). Runs the page started before Run was pressed
    # (the current side) are waited for, not started again; one whose warm-up failed
    # runs here.
    _WARMUP.drop_waiting()
    warming: dict[Any, Future[Any]] = {}
    for p in points:
        future = _WARMUP.waitable(cache_key(p)) if cache_key(p) not in cache else None
        if future is not None:
            warming[p] = future
    todo = [p for p in points if cache_key(p) not in cache and p not in warming]
    client = None
    if todo:
        try:
            client = _dask(os.environ.get(SCHEDULER_ENV) or None, _workers())
        except Exception as exc:  # an unreachable scheduler is a sentence, not a traceback
            st.warning(f"Dask is not available ({type(exc).__name__}: {exc}); running here, one by one.")
    parallel = len(client.scheduler_info().get("workers", {})) if client is not None else 1
    preview = stage == whatif.PREVIEW_POLICY != request.policy
    quick = stage == whatif.QUICK_STAGE
    word = (
        "Preview under fairshare" if preview
        else f"Quick mip answer ({whatif.QUICK_S} a plan)" if quick
        else f"Simulating under {policy}"
    )
    tracker = RunProgress.of(
        [(p, p.label) for p in points if p in warming or p in todo],
        total_h=request.days * 24,
        parallel=parallel,
        seconds_per_hour=_seconds_per_hour().get((loaded.key, stage)),
    )
    with st.status(f"{word}: {len(points)} runs ({request.replicates} replicates a side)", expanded=True) as box:
        headline = st.empty()
        bar = st.progress(0.0)
        detail = st.empty()
        if preview:
            st.caption("The mip answer follows and replaces this preview when it is ready.")
        elif quick:
            st.caption(
                f"Each plan's search stops at {whatif.QUICK_S} here; the mip answer with the "
                f"what-if's {whatif.FULL_S} plans follows and replaces this one when it is ready."
            )
        early = st.empty()
        shown_first = [len(points) <= 2]  # one replicate a side: the full answer is the first

        def draw() -> None:
            headline.markdown(tracker.headline())
            bar.progress(min(1.0, tracker.fraction()))
            detail.markdown("\n".join(f"- {line}" for line in tracker.lines()))

        retry: list[whatif.Point] = []

        def collect() -> None:
            """Pass on the warm-up's runs: hours so far, and those that ended."""
            for point, future in list(warming.items()):
                if point not in warming:
                    continue  # passed on already, by the call this one is inside
                told = _WARMUP.hours(cache_key(point))
                if not future.done():
                    if told is not None:
                        tracker.hours(point, *told)
                    continue
                del warming[point]
                _WARMUP.forget(cache_key(point))
                if future.exception() is not None:
                    retry.append(point)
                else:
                    finished(point, future.result(), None)

        def hours(point: whatif.Point, done: float, total: float) -> None:
            tracker.hours(point, done, total)
            collect()
            draw()

        def finished(point: whatif.Point, result: Any, error: str | None) -> None:
            collect()
            tracker.finish(point, error)
            if result is not None:
                cache[cache_key(point)] = result
                per_hour = result.seconds / max(request.days * 24, 1e-9)
                _seconds_per_hour()[(loaded.key, stage)] = per_hour
            draw()
            if not shown_first[0]:
                pair = whatif.first_pair({p: cache[cache_key(p)] for p in points if cache_key(p) in cache})
                if pair is not None:
                    shown_first[0] = True
                    with early.container():
                        _first_answer(s, request, pair, tracker.elapsed)

        draw()
        try:
            if todo:
                whatif.run_points(
                    s, todo, shares, request.days, fingerprint=loaded.key, client=client,
                    on_point=finished, on_hours=hours, options=options,
                )
            while warming:
                wait(list(warming.values()), timeout=0.25, return_when=FIRST_COMPLETED)
                collect()
                draw()
            if retry:
                if client is None:
                    client = _dask(os.environ.get(SCHEDULER_ENV) or None, _workers())
                whatif.run_points(
                    s, retry, shares, request.days, fingerprint=loaded.key, client=client,
                    on_point=finished, on_hours=hours, options=options,
                )
        except Exception as exc:  # the simulator's trouble is a sentence, not a traceback
            box.update(label="The simulation failed", state="error")
            st.error(f"The what-if failed: {type(exc).__name__}: {exc}")
            st.session_state.pop("whatif_todo", None)
            return False
        box.update(label=f"{word}: done in {tracker.headline()}", state="complete", expanded=False)
    runs = {p: cache[cache_key(p)] for p in points}
    st.session_state["whatif"] = (request, stage, runs)
    return True


def _first_answer(s: Scenario, request: Any, pair: tuple[Any, Any], seconds: float) -> None:
    """Each program's delivered GPU-hours from the first replicate pair, while the other
    replicates run (their spread decides what is within noise)."""
    from app_streamlit import whatif

    edited = state.with_edited_shares(s, dict(request.shares))
    units = whatif.compare_units(s, edited, [pair[0]], [pair[1]])
    programs = units[units["level"] == 0]
    st.markdown(
        f"**First answer** after {seconds:.0f} s, from one replicate a side; the spread and "
        "the *within noise* marks follow with the other replicates."
    )
    st.dataframe(
        pd.DataFrame({
            "Program": programs["unit"],
            "Delivered now (GPU-h)": programs["delivered_gpu_h_now"].round(0),
            "Delivered edited (GPU-h)": programs["delivered_gpu_h_edited"].round(0),
            "First answer: change (GPU-h)": programs["delivered_gpu_h_change"].round(0),
        }),
        hide_index=True,
    )


def _sides(runs: Mapping[Any, Any]) -> tuple[list[Any], list[Any]]:
    current = [r for p, r in sorted(runs.items(), key=lambda kv: kv[0].replicate) if p.budgets == "current"]
    edited = [r for p, r in sorted(runs.items(), key=lambda kv: kv[0].replicate) if p.budgets == "edited"]
    return current, edited


def _show_results(s: Scenario, stored: Any, below: Any, *, final: bool) -> None:
    """Programs first: a tile per program here, then the tree table and the downloads
    (in ``below``, the full width under the editor)."""
    from app_streamlit import whatif

    request, stage, runs = stored
    edited = state.with_edited_shares(s, dict(request.shares))
    current_runs, edited_runs = _sides(runs)
    units = whatif.compare_units(s, edited, current_runs, edited_runs)
    st.subheader("Programs: delivered GPU-hours, edited budgets")
    if stage == whatif.QUICK_STAGE:
        st.info(
            f"**Quick mip answer**: each plan searched for {whatif.QUICK_S}. Measured on "
            f"ai2-like, the programs' changes got the same verdict as with {whatif.FULL_S} "
            "plans in 23 of 30 cases and never the opposite one, and the totals differed a "
            "little (delivered / owed about 0.006 lower, about 6 % fewer preemptions). The "
            f"answer with {whatif.FULL_S} plans replaces it when ready."
        )
    elif stage != request.policy:
        st.info(f"**Preview** under fairshare (fast); the {request.policy} answer replaces it when ready.")
    plans, fallbacks = whatif.plan_counts([*current_runs, *edited_runs])
    st.caption(
        f"Under {whatif.stage_words(stage)}, {request.replicates} replicate(s) a side. Each "
        "change is edited minus current, ± one standard deviation over the replicates; a grey "
        "change is **within noise** (the two sides' replicates overlap)."
        + (" " + whatif.plan_words(plans, fallbacks) if plans else "")
    )
    with st.container(horizontal=True, gap="small", key="tiles"):
        for u in units[units["level"] == 0].to_dict("records"):
            noisy = not bool(u["delivered_gpu_h_separated"])
            change = whatif.change_words(
                float(u["delivered_gpu_h_change"]), float(u["delivered_gpu_h_spread"]),
                float(u["delivered_gpu_h_now"]), True,
            )
            wait = whatif.wait_change_words(
                float(u["wait_p90_s_change"]), float(u["wait_p90_s_spread"]), bool(u["wait_p90_s_separated"])
            )
            with st.container(border=True, width=222):
                st.metric(
                    f"**{u['unit']}** · {u['pct_cluster_now']:.1f} → {u['pct_cluster_edited']:.1f} %",
                    f"{u['delivered_gpu_h_edited']:,.0f} GPU-h",
                    change,
                    delta_color="off" if noisy else "normal",
                    help="Share of the cluster now → edited; delivered GPU-hours with the edited "
                    "budgets, and the change from the current ones. " + whatif.OWED_WORDS,
                )
                st.markdown(
                    (":gray-badge[within noise]" if noisy else ":blue-badge[outside the noise]")
                    + f"  \nowed {u['owed_gpu_h_now']:,.0f} → {u['owed_gpu_h_edited']:,.0f} GPU-h  \n"
                    f"p90 wait {whatif.format_wait(float(u['wait_p90_s_now']))} → "
                    f"{whatif.format_wait(float(u['wait_p90_s_edited']))} ({wait})"
                )
    with below:
        st.subheader("Drill down: program → team → project")
        st.caption("Each row is the subtotal of the units below it. " + whatif.OWED_WORDS)
        depth_name = (
            st.radio("Show", list(DEPTHS), horizontal=True, key="tree_depth", label_visibility="collapsed")
            if final
            else "programs and teams"
        )
        table = whatif.tree_table(units, DEPTHS[depth_name])
        st.dataframe(
            table.style.apply(_noise_colours, axis=1),
            hide_index=True,
            key="tree_table" if final else None,
            height=_full_height(table, most=70),
            column_order=[c for c in table.columns if c not in ("Path", "Within noise")],
            column_config=_tree_columns(),
        )
        if final:
            _downloads(s, request, stage, units, current_runs, edited_runs)


def _noise_colours(row: pd.Series) -> list[str]:
    """Grey for a change within noise, green for a gain, red for a loss."""
    styles = [""] * len(row)
    columns = list(row.index)
    text = str(row["Change in delivered"])
    colour = "#888888" if row["Within noise"] else ("#1a7f37" if text.startswith("+") else "#cf222e")
    styles[columns.index("Change in delivered")] = f"color: {colour}; font-weight: 600"
    wait = str(row["Change in p90 wait"])
    if "within noise" in wait or wait.startswith("unchanged"):
        styles[columns.index("Change in p90 wait")] = "color: #888888"
    else:
        good = wait.startswith("-")
        styles[columns.index("Change in p90 wait")] = f"color: {'#1a7f37' if good else '#cf222e'}"
    return styles


def _tree_columns() -> dict[str, Any]:
    from app_streamlit import whatif

    owed_help = whatif.OWED_WORDS
    return {
        "Org unit": st.column_config.TextColumn(width="medium", pinned=True),
        "Change in delivered": st.column_config.TextColumn(
            width="large",
            help="Mean over replicates of edited minus current, ± the standard deviation of "
            "the paired changes; 'within noise' when the two sides' replicates overlap.",
        ),
        "Owed GPU-h, now": st.column_config.NumberColumn(format="localized", help=owed_help),
        "Owed GPU-h, edited": st.column_config.NumberColumn(format="localized", help=owed_help),
        "Delivered within owed (capped), now": st.column_config.NumberColumn(
            format="localized", help="Delivered, capped hour by hour at what was owed. " + owed_help
        ),
        "Delivered within owed (capped), edited": st.column_config.NumberColumn(
            format="localized", help="Delivered, capped hour by hour at what was owed. " + owed_help
        ),
        "Delivered GPU-h, now": st.column_config.NumberColumn(format="localized"),
        "Delivered GPU-h, edited": st.column_config.NumberColumn(format="localized"),
        "Share of cluster, edited": st.column_config.NumberColumn(format="%.2f %%"),
    }


def metadata(s: Scenario, request: Any, stage: str) -> dict[str, Any]:
    """Where a download came from: scenario, period, scheduler (and its options, such as
    the quick stage's shorter plans), replicates and shares."""
    from app_streamlit import whatif

    current = {p: u.share for p, u in walk(s.org)}
    policy, options = whatif.stage_run(stage)
    return {
        "scenario": s.name,
        "scenario_fingerprint": request.key,
        "period_days": request.days,
        "scheduler": policy,
        "scheduler_options": json.dumps(options, sort_keys=True),
        "replicates": request.replicates,
        "replicate_method": f"arrival times moved uniformly by up to ±{whatif.JITTER_S / 60:g} min, "
        "seed = replicate number, replicate 0 unperturbed",
        "edited_shares": json.dumps({p: [current[p], v] for p, v in sorted(request.shares)}),
        "created": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def _downloads(
    s: Scenario, request: Any, stage: str, units: pd.DataFrame, current: list[Any], edited: list[Any]
) -> None:
    from app_streamlit import whatif

    meta = metadata(s, request, stage)
    results = [whatif.mean_summary(current, "current budgets"), whatif.mean_summary(edited, "edited budgets")]
    summary = whatif.with_readable_waits(whatif.summary_frame(results))
    per_unit = units.copy()
    for c in [c for c in per_unit.columns if c.startswith("wait_p90_s_") and not c.endswith("separated")]:
        per_unit[c.replace("wait_p90_s_", "wait_p90_h_")] = per_unit[c] / 3600.0
    left, right, third = st.columns(3)
    left.download_button(
        "Org units (CSV)",
        whatif.csv_with_metadata(per_unit, meta),
        file_name=f"whatif-{s.name}-units.csv",
        mime="text/csv",
        on_click="ignore",
        key="download_units",
    )
    right.download_button(
        "Summary (CSV)",
        whatif.csv_with_metadata(summary, meta),
        file_name=f"whatif-{s.name}-summary.csv",
        mime="text/csv",
        on_click="ignore",
        key="download_summary",
    )
    third.download_button(
        "Where these came from (JSON)",
        json.dumps(meta, indent=2),
        file_name=f"whatif-{s.name}-metadata.json",
        mime="application/json",
        on_click="ignore",
        key="download_metadata",
    )
    st.caption("Each CSV starts with `# key: value` lines naming its scenario, period, "
               "scheduler, replicates and shares (`pandas.read_csv(f, comment='#')` skips them).")


# -- page 2: details --------------------------------------------------------------------------


def details_page(loaded: LoadedScenario) -> None:
    """Headline metrics side by side, and the charts, for the last what-if."""
    from app_streamlit import whatif

    st.header("Details of the last what-if")
    stored = st.session_state.get("whatif")
    if stored is None or stored[0].key != loaded.key:
        st.info("Run a what-if on the first tab; its details show here.")
        return
    request, stage, runs = stored
    current, edited = _sides(runs)
    results = [whatif.mean_summary(current, "current budgets"), whatif.mean_summary(edited, "edited budgets")]
    variants = [r.label for r in results]
    st.caption(
        f"Under {whatif.stage_words(stage)}; each figure is the mean over "
        f"{request.replicates} replicate(s) a side."
    )
    summary = whatif.summary_frame(results)
    st.subheader("Side by side")
    table = whatif.summary_table(summary)
    st.dataframe(
        table,
        hide_index=True,
        key="summary_table",
        height=_full_height(table),
        column_config={"Metric": st.column_config.TextColumn(width=260, pinned=True)},
    )
    units = whatif.compare_units(
        loaded.scenario, state.with_edited_shares(loaded.scenario, dict(request.shares)), current, edited
    )
    st.plotly_chart(charts.program_deltas(units), key="chart_program_deltas")
    st.plotly_chart(charts.delivered_vs_owed_units(units[units["level"] == 0]), key="chart_delivered")
    st.markdown("**How long jobs waited to start**, per job class")
    jobs = whatif.jobs_frame(results)
    for job_class in whatif.CLASSES:
        st.plotly_chart(charts.wait_cdf(jobs, variants, job_class), key=f"chart_wait_{job_class}")
    st.caption(whatif.CLASS_WORDS)
    st.plotly_chart(charts.occupancy_over_time(whatif.occupancy_frame(results), variants), key="chart_occupancy")
    st.plotly_chart(charts.preemption_bars(summary, variants), key="chart_preemptions")


# -- page 3: cluster and budgets ---------------------------------------------------------------


def budgets_page(loaded: LoadedScenario, days: float, edits: dict[str, float]) -> None:
    """Cluster, every unit's share now and edited, and the edited scenario file."""
    s = loaded.scenario
    st.header("Cluster and budgets")
    st.subheader("Cluster")
    st.dataframe(state.pools_table(s), hide_index=True, key="pools_table")
    maintenance = state.maintenance_table(s)
    if len(maintenance):
        st.markdown("**Planned maintenance** (drained nodes take no new work)")
        st.dataframe(maintenance, hide_index=True, key="maintenance_table")
    st.subheader("Every unit's share")
    edited = state.with_edited_shares(s, edits)
    alloc = state.allocation_table(s, edited, days)
    st.dataframe(
        pd.DataFrame(
            {
                "Org unit": [("\u2003" * int(lv)) + u.rsplit("/", 1)[-1] for u, lv in zip(alloc["unit"], alloc["level"], strict=True)],
                "Kind": alloc["kind"],
                "% of parent now": alloc["pct_parent_now"].round(1),
                "% of parent edited": alloc["pct_parent_edited"].round(1),
                "% of cluster now": alloc["pct_cluster_now"].round(2),
                "% of cluster edited": alloc["pct_cluster_edited"].round(2),
                "Allocation edited (GPU-h)": alloc["allocation_edited_gpu_h"].round(0),
            }
        ),
        hide_index=True,
        key="units_table",
        height=_full_height(alloc, most=80),
        column_config={
            "Allocation edited (GPU-h)": st.column_config.NumberColumn(
                format="localized",
                help=state.ALLOCATION_WORDS,
            )
        },
    )
    st.subheader("Download")
    try:
        text = state.edited_scenario_yaml(loaded, edits)
        st.download_button(
            "Download the edited budgets as a scenario file",
            text,
            file_name=f"{s.name}-edited-budgets.yaml",
            mime="application/x-yaml",
            on_click="ignore",
            key="download_scenario",
            help="The original scenario file with your shares; `gpuplan validate` reads it.",
        )
    except ScenarioError as exc:
        st.error(f"The edited scenario cannot be written: {exc}")


# -- page 4: plan of one epoch ---------------------------------------------------------------


def plan_page(loaded: LoadedScenario, days: float, edits: dict[str, float]) -> None:
    """One epoch's time-slice plan as a Gantt chart per program, with reasons in words."""
    st.header("Plan of one epoch")
    st.markdown(
        "The planner decides, for each epoch, which job runs on which nodes in each time "
        "slice. Pick a moment: the plan starts from the queue as it would be then (nothing "
        "running yet), like `gpuplan plan --at`."
    )
    if not (_available("planner.mip") and _available("planner.snapshot")):
        st.warning("The plan view needs the epoch planner (planner.mip, planner.snapshot), which is not installed.")
        return
    s = loaded.scenario
    epoch_h = s.policy.epoch / state.HOUR
    profile = _profile(loaded.key, s)
    busiest = state.busiest_hour(profile, epoch_h)
    left, right = st.columns(2)
    budgets = left.radio(
        "Budgets", ["edited", "current"], horizontal=True, key="plan_budgets",
        format_func=lambda b: f"{b} budgets",
    )
    hours = right.number_input(
        "Epoch starts at (hours after the scenario's start)",
        min_value=0.0,
        max_value=float(math.ceil(state.workload_days(s) * 24)),
        value=float(busiest),
        step=epoch_h,
        key=f"plan_hours::{loaded.key}",
        help=f"Starts at hour {busiest:g}, where the submitted work most exceeds the cluster.",
    )
    busy, _ = state.contended_hours(profile, float(hours), epoch_h / 24)
    if not busy:
        st.caption(
            f"Demand fits the cluster at hour {hours:g}, so the plan may be simple; hour "
            f"{busiest:g} is the busiest."
        )
    use_edits = edits if budgets == "edited" else {}
    scenario = state.with_edited_shares(s, use_edits)
    shares = state.shares_key(use_edits)
    if st.button("Plan this epoch", type="primary", key="run_plan"):
        with st.spinner("Solving the epoch's plan (up to about 10 s)..."):
            try:
                plan = _plan(loaded.key, shares, float(hours), scenario)
            except Exception as exc:
                st.error(f"Planning failed: {type(exc).__name__}: {exc}")
                return
        st.session_state["plan"] = ((loaded.key, shares, float(hours)), plan)
    stored = st.session_state.get("plan")
    if stored is None or stored[0][0] != loaded.key:
        st.info("Press **Plan this epoch**.")
        return
    (_, shown_shares, shown_hours), plan = stored
    if (shown_shares, shown_hours) != (shares, float(hours)):
        st.warning("This plan is for earlier settings. Press **Plan this epoch** to update it.")
    _show_plan(s, plan)


def _show_plan(s: Scenario, plan: Plan) -> None:
    st.info(planview.solver_line(plan))
    frame = planview.slices_frame(plan)
    programs = [u.name for u in s.org]
    frame["program"] = [state.program_of(p) for p in frame["project"]] if len(frame) else []
    busy = frame.groupby("program")["job"].nunique().to_dict() if len(frame) else {}
    program = st.selectbox(
        "Program",
        programs,
        format_func=lambda p: f"{p} ({busy.get(p, 0)} jobs planned)",
        key="plan_program",
    )
    mine = frame[frame["program"] == program] if len(frame) else frame
    bars = planview.job_bars(mine)
    title = (
        f"{program}: its jobs from hour {plan.epoch_start / state.HOUR:g} to "
        f"{plan.epoch_end / state.HOUR:g} ({len(plan.slices)} slices)"
    )
    boundaries = sorted({sl.start / state.HOUR for sl in plan.slices} | {plan.epoch_end / state.HOUR})
    st.plotly_chart(charts.program_gantt(bars, title, boundaries, s.projects), key="chart_gantt")
    st.caption(
        "One row per job of the program; each bar says how many GPUs on how many nodes it "
        "gets, coloured by its project (a colour of its own per project). Dotted lines mark "
        "the time slices."
    )
    if plan.drained_nodes:
        st.markdown("**Nodes drained for maintenance**, and when their last job leaves them")
        st.dataframe(planview.drained_frame(plan), hide_index=True, key="drained_table")
    st.subheader(f"Waiting jobs ({len(plan.pending)})")
    pending = planview.pending_frame(plan, s)
    if len(pending):
        st.markdown("**Why, per program** (jobs waiting, and the GPUs they ask for)")
        reasons = planview.reasons_by_program(pending)
        st.dataframe(reasons, hide_index=True, key="reasons_table", height=_full_height(reasons))
    with st.expander(f"Every waiting job ({len(pending)})"):
        st.dataframe(
            pending,
            hide_index=True,
            key="pending_table",
            column_config={
                "Waiting because": st.column_config.TextColumn(width="large"),
                "Detail": st.column_config.TextColumn(width="large"),
            },
        )
    if plan.projects:
        st.subheader("GPU-hours per project in this epoch")
        per_project = planview.projects_frame(plan)
        st.dataframe(per_project, hide_index=True, key="plan_projects", height=_full_height(per_project))

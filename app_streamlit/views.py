"""The app's pages: Streamlit layout over the plain functions of ``state``, ``whatif``,
``planview`` and ``charts``.

Every failure a user can cause (a bad file, a bad share, a solver or simulator error) is
shown as a sentence on the page, never as a traceback.
"""

from __future__ import annotations

import importlib.util
import math
import time
from typing import Any

import pandas as pd
import streamlit as st

from app_streamlit import charts, planview, state
from app_streamlit.state import LoadedScenario
from models import Plan, Pool, Scenario, walk
from scenarios.errors import ScenarioError
from scenarios.load import bundled_scenarios

UPLOAD = "Upload a scenario file"
ROW_PX = 35  # Streamlit's table row height


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


@st.cache_data(show_spinner="Computing owed GPU-hours...", max_entries=64)
def _owed_table(
    key: str, shares: tuple[tuple[str, float], ...], days: float, _loaded: LoadedScenario
) -> pd.DataFrame:
    del key
    edited = state.with_edited_shares(_loaded.scenario, dict(shares))
    return state.owed_comparison(_loaded.scenario, edited, days)


@st.cache_data(show_spinner=False, max_entries=32)
def _simulate(
    key: str, shares: tuple[tuple[str, float], ...], policy: str, days: float, _scenario: Scenario
) -> Any:
    from app_streamlit import whatif

    del key, shares
    return whatif.run(_scenario, policy, days)


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
    bar.caption(
        "GPU-hours are H100-equivalents: an hour of a GPU counts its type's exchange rate "
        + ", ".join(f"({t} = {g.rate:g})" for t, g in s.gpu_types.items())
        + "."
    )
    return loaded, float(days)


# -- page 1: cluster and budgets --------------------------------------------------------------


def budgets_page(loaded: LoadedScenario, days: float) -> dict[str, float]:
    """Cluster, org tree, the share editor and the owed GPU-hours; returns the share edits."""
    s = loaded.scenario
    st.header(f"Scenario {s.name}: cluster and budgets")
    cols = st.columns(5)
    cols[0].metric("GPUs", f"{sum(n.gpus for n in s.nodes):,}")
    cols[1].metric("Capacity (H100-eq GPUs)", f"{s.capacity_h100():,.0f}")
    cols[2].metric("Projects", f"{len(s.projects):,}")
    cols[3].metric("Jobs in the workload", f"{len(s.jobs):,}")
    cols[4].metric("Workload span (days)", f"{state.workload_days(s):.1f}")

    st.subheader("Cluster")
    st.dataframe(state.pools_table(s), hide_index=True, key="pools_table")
    maintenance = state.maintenance_table(s)
    if len(maintenance):
        st.markdown("**Planned maintenance** (drained nodes take no new work)")
        st.dataframe(maintenance, hide_index=True, key="maintenance_table")

    st.subheader("Org tree and budgets")
    st.markdown(
        "Each unit's **share** is a weight among its siblings: a program with share 3 next "
        "to one with share 1 gets 75% of the cluster. A unit's **effective share** is its "
        "fraction of the whole cluster. Edit any share in the table; everything below "
        "updates at once."
    )
    if s.budget_revisions:
        st.info(
            f"This scenario revises budgets {len(s.budget_revisions)} time(s) later on; "
            "your edits change the starting shares, and those revisions still apply."
        )
    table = state.share_table(s)
    edited_table = st.data_editor(
        table,
        key=f"shares::{loaded.key}",
        hide_index=True,
        height=_full_height(table, most=200),  # every unit visible, no inner scrolling
        disabled=[c for c in table.columns if c != state.COL_SHARE],
        column_config={
            state.COL_UNIT: st.column_config.TextColumn(state.COL_UNIT, width="medium"),
            state.COL_SHARE: st.column_config.NumberColumn(
                "Share (edit me)", min_value=0.001, format="%.3g", required=True,
                help="Weight among the unit's siblings; must be above 0.",
            ),
            state.COL_EFFECTIVE: st.column_config.NumberColumn(
                "Effective share now (%)", format="%.2f%%"
            ),
            state.COL_GPUS: st.column_config.NumberColumn("H100-eq GPUs now", format="%.1f"),
        },
    )
    try:
        edits = state.shares_from_table(s, edited_table)
    except ScenarioError as exc:
        st.error(f"That share cannot be used: {exc}. The other edits still apply without it.")
        edits = _valid_edits(s, edited_table)
    edited = state.with_edited_shares(s, edits)
    if edits:
        current = {p: u.share for p, u in walk(s.org)}
        st.success(
            "Edited: " + "; ".join(f"{p} share {current[p]:g} → {v:g}" for p, v in sorted(edits.items()))
        )

    st.subheader(f"Owed GPU-hours (H100-eq) per project over the first {days:g} days")
    st.markdown(
        "A project is **owed** its effective share of the cluster, capped by its own demand, "
        "plus what idle projects leave over (hour by hour). These figures come from the "
        "budgets and the workload alone; the what-if tab shows what a scheduler delivers."
    )
    if not _available("planner.fairshare"):
        st.warning("Owed GPU-hours need the fair-share module (planner.fairshare), which is not installed.")
    else:
        try:
            owed = _owed_table(loaded.key, state.shares_key(edits), days, loaded)
        except Exception as exc:  # shown as a sentence: the page never shows a traceback
            st.error(f"Owed GPU-hours could not be computed: {type(exc).__name__}: {exc}")
        else:
            st.dataframe(owed, hide_index=True, key="owed_table", height=_full_height(owed))
            left, right = st.columns([3, 2])
            left.plotly_chart(charts.owed_bars(owed), key="owed_bars")
            right.plotly_chart(charts.org_sunburst(edited), key="org_sunburst")

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
    return edits


def _valid_edits(s: Scenario, table: pd.DataFrame) -> dict[str, float]:
    """The edits of ``table`` without the rows whose share is unusable."""
    good = []
    for i in range(len(table)):
        try:
            state.shares_from_table(s, table.iloc[[i]])
        except ScenarioError:
            continue
        good.append(i)
    return state.shares_from_table(s, table.iloc[good])


# -- page 2: what-if -------------------------------------------------------------------------


def whatif_page(loaded: LoadedScenario, days: float, edits: dict[str, float]) -> None:
    """Run the workload under the current and the edited budgets and compare."""
    st.header("What-if: current budgets vs edited budgets")
    if not _available("planner.simulator") or not _available("app_streamlit.whatif"):
        st.warning("What-if runs need the simulator (planner.simulator), which is not installed.")
        return
    from app_streamlit import whatif

    s = loaded.scenario
    if not edits:
        st.info("You have not edited any share yet (tab 1), so both runs will be the same.")
    policies = whatif.available_policies()
    if not policies:
        st.warning("No scheduler policy of the simulator is installed.")
        return
    left, right = st.columns(2)
    policy = left.selectbox(
        "Scheduler",
        policies,
        format_func=lambda p: whatif.POLICY_WORDS[p],
        key="policy",
        help="The scheduler both budget sets are simulated under.",
    )
    others = [p for p in policies if p != policy]
    baselines = right.multiselect(
        "Also show the edited budgets under",
        others,
        format_func=lambda p: whatif.POLICY_WORDS[p],
        key="baselines",
        help="Optional extra runs, to compare schedulers as well as budgets.",
    )
    st.caption(
        f"Simulates the first {days:g} days of the workload ({len(s.jobs):,} jobs in all). "
        "The planner (mip) solves an optimization every epoch: on a large scenario expect "
        "minutes per simulated day, where fairshare and legacy take seconds. Results are "
        "kept: running the same settings again is instant."
    )
    request = whatif.Request(
        key=loaded.key, shares=state.shares_key(edits), policy=policy, baselines=tuple(baselines), days=days
    )
    if st.button("Run what-if", type="primary", key="run_whatif"):
        runs = whatif.runs_for(request)
        results = []
        started = time.monotonic()
        with st.status(f"Simulating {len(runs)} runs...", expanded=True) as status:
            bar = st.progress(0.0, text="Starting")
            for i, spec in enumerate(runs):
                bar.progress(i / len(runs), text=f"Run {i + 1} of {len(runs)}: {spec.label}")
                scenario = s if spec.budgets == "current" else state.with_edited_shares(s, edits)
                shares = () if spec.budgets == "current" else request.shares
                t0 = time.monotonic()
                try:
                    result = _simulate(loaded.key, shares, spec.policy, days, scenario)
                except Exception as exc:  # the simulator's trouble is a sentence, not a traceback
                    status.update(label="The simulation failed", state="error")
                    st.error(f"Simulating {spec.label} failed: {type(exc).__name__}: {exc}")
                    return
                st.write(f"{spec.label}: done in {time.monotonic() - t0:.1f} s")
                results.append(whatif.labelled(result, spec.label))
            bar.progress(1.0, text="Done")
            status.update(
                label=f"Simulated {len(runs)} runs in {time.monotonic() - started:.1f} s",
                state="complete",
                expanded=False,
            )
        st.session_state["whatif"] = (request, results)
    stored = st.session_state.get("whatif")
    if stored is None:
        st.info("Press **Run what-if** to simulate.")
        return
    shown_request, results = stored
    if shown_request.key != loaded.key:
        st.info("Press **Run what-if** to simulate this scenario.")
        return
    if shown_request != request:
        st.warning(
            "These results are for earlier settings (budgets, scheduler or period). "
            "Press **Run what-if** to update them."
        )
    _show_results(results)


def _show_results(results: list[Any]) -> None:
    from app_streamlit import whatif

    variants = [r.label for r in results]
    summary = whatif.summary_frame(results)
    projects = whatif.projects_frame(results)
    st.subheader("Verdict per project (edited vs current budgets)")
    verdicts = whatif.verdicts(results[0], results[1])
    st.dataframe(
        verdicts,
        hide_index=True,
        key="verdicts",
        height=_full_height(verdicts),
        column_config={"Verdict (edited vs current budgets)": st.column_config.TextColumn(width="large")},
    )
    st.subheader("Side by side")
    table = whatif.summary_table(summary)
    st.dataframe(table, hide_index=True, key="summary_table", height=_full_height(table))
    st.plotly_chart(charts.delivered_vs_owed(projects, variants), key="chart_delivered")
    st.markdown("**How long jobs waited to start**, per job class")
    jobs = whatif.jobs_frame(results)
    cols = st.columns(2)
    for i, job_class in enumerate(whatif.CLASSES):
        with cols[i % 2]:
            st.plotly_chart(charts.wait_cdf(jobs, variants, job_class), key=f"chart_wait_{job_class}")
    st.caption(whatif.CLASS_WORDS)
    left, right = st.columns([2, 1])
    with left:
        st.plotly_chart(
            charts.occupancy_over_time(whatif.occupancy_frame(results), variants), key="chart_occupancy"
        )
    with right:
        st.plotly_chart(charts.preemption_bars(summary, variants), key="chart_preemptions")
    st.subheader("Per project")
    st.dataframe(whatif.projects_table(projects), hide_index=True, key="projects_table")
    left, right = st.columns(2)
    left.download_button(
        "Download per-project results (CSV)",
        projects.to_csv(index=False),
        file_name="whatif-projects.csv",
        mime="text/csv",
        on_click="ignore",
        key="download_projects",
    )
    right.download_button(
        "Download the summary (CSV)",
        summary.to_csv(index=False),
        file_name="whatif-summary.csv",
        mime="text/csv",
        on_click="ignore",
        key="download_summary",
    )


# -- page 3: plan of one epoch ---------------------------------------------------------------


def plan_page(loaded: LoadedScenario, days: float, edits: dict[str, float]) -> None:
    """One epoch's time-slice plan as a Gantt chart per pool, with pending reasons."""
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
    left, right = st.columns(2)
    budgets = left.radio(
        "Budgets", ["edited", "current"], horizontal=True, key="plan_budgets",
        format_func=lambda b: f"{b} budgets",
    )
    hours = right.number_input(
        "Epoch starts at (hours after the scenario's start)",
        min_value=0.0,
        max_value=float(math.ceil(state.workload_days(s) * 24)),
        value=0.0,
        step=epoch_h,
        key=f"plan_hours::{loaded.key}",
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
    _show_plan(s, plan, shown_hours)


def _show_plan(s: Scenario, plan: Plan, hours: float) -> None:
    st.caption(planview.solver_line(plan))
    frame = planview.slices_frame(plan)
    pools = [str(p) for p in s.pools]
    busy = frame.groupby("pool")["job"].nunique().to_dict() if len(frame) else {}
    pool_name = st.selectbox(
        "Pool",
        pools,
        format_func=lambda p: f"{p} ({busy.get(p, 0)} jobs planned)",
        key="plan_pool",
    )
    pool = s.pools[pools.index(pool_name)]
    nodes = planview.pool_nodes(s, Pool(*pool))
    title = (
        f"Pool {pool_name}: epoch from hour {plan.epoch_start / state.HOUR:g} to "
        f"{plan.epoch_end / state.HOUR:g}, {len(plan.slices)} slices"
    )
    bars = planview.merged_runs(frame[frame["pool"] == pool_name])
    boundaries = sorted({sl.start / state.HOUR for sl in plan.slices} | {plan.epoch_end / state.HOUR})
    drained = sorted(planview.drained_during(s, plan))
    st.plotly_chart(
        charts.plan_gantt(bars, nodes, title, boundaries, drained, s.projects), key="chart_gantt"
    )
    st.caption(
        "One row per node of the pool; each bar is a job on that node, coloured by project. "
        "Jobs sharing a node sit in thinner lanes of its row; empty rows are idle or drained "
        "nodes. Dotted lines mark the epoch's time slices."
    )
    if plan.drained_nodes:
        st.markdown("**Nodes drained for maintenance**, and when their last job leaves them")
        st.dataframe(planview.drained_frame(plan), hide_index=True, key="drained_table")
    st.subheader(f"Waiting jobs ({len(plan.pending)})")
    pending = planview.pending_frame(plan, s)
    if len(pending):
        st.dataframe(planview.reasons_frame(pending), hide_index=True, key="reasons_table")
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
        st.dataframe(planview.projects_frame(plan), hide_index=True, key="plan_projects")

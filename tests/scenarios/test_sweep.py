"""Scenario sweeps: grid edits, result rows, Dask execution, worker loss and resume."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from distributed import Client, LocalCluster, get_task_stream
from hypothesis import given, settings
from hypothesis import strategies as st

from models import Scenario
from planner.scheduler import OPTIONS as POLICY_OPTIONS
from planner.simulator import simulate
from scenarios import bundled_scenarios, load_scenario, sweep
from scenarios.sweep import (
    ELAPSED_COLUMN,
    SweepBase,
    SweepConfig,
    SweepError,
    expand,
    flatten_summary,
    point_key,
    run_sweep,
    takes_progress_callable,
)

GENERATED = """\
name: small-generated
gpu_types: {H100: {rate: 1.0}}
clusters:
  - name: alpha
    node_groups: [{gpu_type: H100, nodes: 8, gpus_per_node: 8}]
org:
  - {name: research, share: 3, children: [{name: nlp, share: 2}, {name: vision, share: 1}]}
  - {name: infra, share: 1}
policy: {epoch: 1h, slices: 4, lookback: 7d, max_min_runtime: 8h}
workloads:
  generate: {seed: 1, days: 1, load: 0.8, users: 6}
"""

#: Eight points of the tiny scenario: the grid of the Dask and resume tests.
GRID8: dict[str, list[Any]] = {
    "policy.lookback": ["3d", "7d"],
    "policy.slices": [2, 4],
    "org.research.share": [2, 4],
}
DAYS = 0.5
TINY = SweepBase.from_any("tiny")


# -- runners (module level, so Dask workers can unpickle them) ------------------------


def echo_runner(scenario: Scenario, policy: str, *, days: float | None = None, **options: Any) -> Any:
    """Report the edited fields themselves, so a test sees what reached the scenario."""
    alpha = next(c for c in scenario.clusters if c.name == "alpha")
    return SimpleNamespace(
        summary={
            "lookback_s": scenario.policy.lookback,
            "slices": scenario.policy.slices,
            "shares": {u.name: u.share for u in scenario.org},
            "nlp_share": scenario.org[0].children[0].share if scenario.org[0].children else None,
            "alpha_nodes": sum(g.nodes for g in alpha.node_groups),
            "jobs": len(scenario.jobs),
            "beta_nodes": sum(g.nodes for c in scenario.clusters if c.name == "beta" for g in c.node_groups),
            "workload": hashlib.sha256(repr([(j.submit, j.gpus, j.duration) for j in scenario.jobs]).encode()).hexdigest(),
            "days": days,
            "policy": policy,
        }
    )


def kill_once_runner(
    scenario: Scenario,
    policy: str,
    *,
    days: float | None = None,
    marker: str,
    calls: str,
    after: int = 3,
    **options: Any,
) -> Any:
    """Simulate, leaving one file per call in ``calls``; the first call to start once
    ``after`` calls have started kills its own worker process (mid-sweep), just once."""
    Path(calls, uuid.uuid4().hex).touch()
    if len(os.listdir(calls)) >= after:
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            pass
        else:
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            os.kill(os.getpid(), signal.SIGKILL)
    return simulate(scenario, policy, days=days, **options)


def logged_runner(
    scenario: Scenario, policy: str, *, days: float | None = None, log: str, **options: Any
) -> Any:
    """Simulate, first appending the point's slice count to ``log`` as it starts, and
    taking at least a second (so that a point given second has started on the other
    worker before the first ends)."""
    with open(log, "a") as f:
        f.write(f"{scenario.policy.slices}\n")
    started = time.monotonic()
    result = simulate(scenario, policy, days=days, **options)
    time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
    return result


def hours_runner(
    scenario: Scenario,
    policy: str,
    *,
    days: float | None = None,
    progress: bool | Callable[[float, float], None] = False,
    **options: Any,
) -> Any:
    """Report two simulated hours through ``progress``, a callable ``(done, total)``."""
    if callable(progress):
        progress(12.0, 24.0)
        progress(24.0, 24.0)
    return echo_runner(scenario, policy, days=days, **options)


def counting_runner(
    scenario: Scenario,
    policy: str,
    *,
    days: float | None = None,
    calls: str,
    stop_after: int | None = None,
    **options: Any,
) -> Any:
    """Simulate, leaving one file per call in ``calls``; Ctrl-C after ``stop_after`` calls."""
    if stop_after is not None and len(os.listdir(calls)) >= stop_after:
        raise KeyboardInterrupt
    Path(calls, uuid.uuid4().hex).touch()
    return simulate(scenario, policy, days=days, **options)


def failing_runner(scenario: Scenario, policy: str, *, days: float | None = None, **options: Any) -> Any:
    """Fail the points with two slices per epoch; simulate the others."""
    if scenario.policy.slices == 2:
        raise RuntimeError("slices=2 is broken in this test")
    return simulate(scenario, policy, days=days, **options)


# -- helpers ----------------------------------------------------------------------------


@pytest.fixture
def generated(tmp_path: Path) -> Path:
    path = tmp_path / "generated.yaml"
    path.write_text(GENERATED)
    return path


@pytest.fixture
def two_workers() -> Iterator[Client]:
    """A real local Dask cluster of two single-threaded worker processes."""
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            worker_dashboard_address=None,
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def results(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame without wall-clock timings, which differ between any two runs."""
    return frame.drop(columns=[ELAPSED_COLUMN]).reset_index(drop=True)


def one(frame: pd.DataFrame, **where: Any) -> dict[str, Any]:
    mask = pd.Series(True, index=frame.index)
    for column, value in where.items():
        mask &= frame[column] == value
    rows = frame[mask].to_dict("records")
    assert len(rows) == 1, where
    return {str(k): v for k, v in rows[0].items()}


# -- the package export ----------------------------------------------------------------


def test_scenarios_sweep_stays_the_function_once_its_module_is_loaded() -> None:
    """``scenarios.sweep`` is the sweep function even after ``scenarios.sweep`` (the
    module of the same name) and ``scenarios.sweep_file`` were imported."""
    import scenarios
    import scenarios.sweep_file  # noqa: F401

    assert scenarios.sweep is sys.modules["scenarios.sweep"].sweep
    assert callable(scenarios.sweep)


def test_importing_scenarios_does_not_load_pandas_or_dask() -> None:
    """``import scenarios`` (done by every gpuplan command) loads neither pandas nor Dask."""
    code = "import sys, scenarios; print(sorted({'pandas', 'distributed', 'tqdm'} & set(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


# -- grid expansion and point keys ----------------------------------------------------


def test_expand_runs_the_product_of_grid_policies_and_seeds(generated: Path) -> None:
    """A 3x2 grid under 2 policies and 2 seeds is 24 points with distinct keys."""
    base = SweepBase.from_any(generated)
    grid = {"policy.lookback": ["3d", "7d", "14d"], "policy.slices": [2, 4]}
    points = expand(base, grid, ["fairshare", "legacy"], [1, 2])
    assert len(points) == 24
    assert len({p.key for p in points}) == 24
    assert points[0].params == (("policy.lookback", "3d"), ("policy.slices", 2))
    assert (points[0].policy, points[0].seed) == ("fairshare", 1)
    assert (points[-1].policy, points[-1].seed) == ("legacy", 2)


def test_point_key_ignores_grid_order_but_not_values() -> None:
    """A point's key is the same whatever the grid's key order, and changes with a value."""
    base = SweepBase.from_any("tiny")
    a = point_key(base, [("policy.slices", 2), ("policy.lookback", "3d")], "fairshare", None, 1.0, {})
    b = point_key(base, [("policy.lookback", "3d"), ("policy.slices", 2)], "fairshare", None, 1.0, {})
    c = point_key(base, [("policy.lookback", "3d"), ("policy.slices", 4)], "fairshare", None, 1.0, {})
    d = point_key(base, [("policy.lookback", "3d"), ("policy.slices", 2)], "fairshare", None, 2.0, {})
    assert a == b
    assert len({a, c, d}) == 3


@settings(derandomize=True, max_examples=30, deadline=None)
@given(
    lookbacks=st.lists(st.sampled_from(["1d", "2d", "3d", "7d", "14d"]), min_size=1, max_size=3, unique=True),
    slices=st.lists(st.integers(1, 8), min_size=1, max_size=3, unique=True),
    policies=st.lists(st.sampled_from(["legacy", "fairshare", "mip"]), min_size=1, max_size=3, unique=True),
)
def test_every_point_has_its_own_key_whatever_the_grid_order(
    lookbacks: list[str], slices: list[int], policies: list[str]
) -> None:
    """Each combination is one point with a key of its own, and listing the grid keys in
    the other order gives the same set of keys."""
    forward = expand(TINY, {"policy.lookback": lookbacks, "policy.slices": slices}, policies)
    backward = expand(TINY, {"policy.slices": slices, "policy.lookback": lookbacks}, policies)
    assert len(forward) == len(lookbacks) * len(slices) * len(policies)
    assert len({p.key for p in forward}) == len(forward)
    assert {p.key for p in forward} == {p.key for p in backward}


# -- edits ------------------------------------------------------------------------------


def test_edits_reach_the_point_scenarios() -> None:
    """Policy, org-unit share (dotted or slashed path), cluster scale and a node-group field
    are each written into the point's scenario."""
    frame = sweep(
        "tiny",
        grid={
            "policy.lookback": ["3d"],
            "org.research.nlp.share": [5],
            "org.research/vision.share": [7],
            "clusters.alpha.scale": [1.5],
            "clusters.beta.node_groups[0].nodes": [3],
        },
        runner=echo_runner,
    )
    row = one(frame)
    assert row["error"] is None
    assert row["lookback_s"] == 3 * 86400
    assert row["nlp_share"] == 5
    assert row["alpha_nodes"] == 6  # 4 nodes x 1.5
    assert row["beta_nodes"] == 3
    assert row["shares.research"] == load_scenario("tiny").org[0].share  # the parent keeps its share


def test_program_share_is_swept() -> None:
    """``org.research.share`` gives each point its value for the program's share."""
    frame = sweep("tiny", grid={"org.research.share": [2, 3, 4]}, runner=echo_runner)
    assert list(frame["shares.research"]) == [2, 3, 4]
    assert list(frame["org.research.share"]) == [2, 3, 4]
    assert set(frame["shares.infra"]) == {1}


def test_seeds_and_generator_fields_apply_to_generated_workloads(generated: Path) -> None:
    """Seeds regenerate the workload (other jobs per seed, the same jobs for one seed), and
    ``workloads.generate.load`` changes the amount of work."""
    frame = sweep(generated, grid={"workloads.generate.load": [0.4, 1.2]}, seeds=[1, 2], runner=echo_runner)
    assert list(frame["seed"]) == [1, 2, 1, 2]
    assert frame["error"].isna().all()
    assert frame.loc[2, "jobs"] > frame.loc[0, "jobs"]
    assert frame.loc[3, "jobs"] > frame.loc[1, "jobs"]
    assert frame.loc[0, "workload"] != frame.loc[1, "workload"]
    same = sweep(generated, grid={"workloads.generate.load": [0.4]}, seeds=[1], runner=echo_runner)
    assert same.loc[0, "workload"] == frame.loc[0, "workload"]


def test_a_loaded_scenario_is_a_base_like_its_file() -> None:
    """A loaded :class:`Scenario` as the base gives the same metrics as its file."""
    grid = {"org.research.share": [2, 5], "maintenance[0].duration": ["1h"]}
    from_file = sweep("tiny", grid=grid, days=DAYS)
    from_model = sweep(load_scenario("tiny"), grid=grid, days=DAYS)
    assert from_file["error"].isna().all()
    # The point keys differ (they hash the base's text); the results do not.
    pd.testing.assert_frame_equal(
        results(from_model).drop(columns="point"), results(from_file).drop(columns="point")
    )


def test_relative_workload_paths_resolve_against_the_base_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A base whose jobs come from a CSV beside it still finds them, whatever the current
    folder, when a point's scenario is rebuilt."""
    folder = tmp_path / "study"
    folder.mkdir()
    (folder / "jobs.csv").write_text(
        "id,project,submit,duration,gpus,min_runtime\n"
        "a,research/nlp,0s,1h,8,30m\n"
        "b,infra,10m,2h,16,1h\n"
    )
    text = bundled_scenarios()["tiny"].read_text()
    (folder / "base.yaml").write_text(text.split("workloads:")[0] + "workloads: {csv: jobs.csv}\n")
    monkeypatch.chdir(tmp_path)
    frame = sweep("study/base.yaml", grid={"policy.slices": [2, 4]}, runner=echo_runner)
    assert frame["error"].isna().all()
    assert list(frame["jobs"]) == [2, 2]


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("clusters.gamma.scale", "no item named 'gamma'"),
        ("org.research.robotics.share", "no org unit 'research.robotics'"),
        ("maintenance[3].duration", r"maintenance has no item \[3\]"),
        ("policy.lookbak", "policy.lookbak is not a scenario field"),
        ("workloads.generate.load", "workload is not generated"),
        ("policy..slices", "cannot read it as a dotted path"),
    ],
)
def test_a_key_that_names_nothing_is_refused_before_running(key: str, message: str) -> None:
    """A grid key that names nothing in the base fails the whole sweep up front, naming it."""
    with pytest.raises(SweepError, match=message) as info:
        sweep("tiny", grid={key: [1]}, runner=echo_runner)
    assert key in str(info.value)


def test_seeds_need_a_generated_workload() -> None:
    """Seeds for a scenario with inline jobs are bad input: they would change nothing."""
    with pytest.raises(SweepError, match="seeds: the base scenario's workload is not generated"):
        sweep("tiny", seeds=[1, 2], runner=echo_runner)


def test_unknown_policy_is_refused() -> None:
    """An unknown policy name fails before anything runs, listing the known ones."""
    with pytest.raises(SweepError, match="unknown policy 'fifo'.*fairshare"):
        sweep("tiny", policies=["fifo"])


def test_options_reach_only_the_policies_that_take_them() -> None:
    """A simulator option (given for all points or swept as ``options.<name>``) goes to the
    policies that take it; the others run without it instead of failing."""
    base = SweepBase.from_any("tiny")
    points = expand(
        base,
        {"options.protected_fraction": [0.0, 0.5]},
        ["fairshare", "legacy"],
        options={"seed": 7},
        policy_takes=POLICY_OPTIONS,
    )
    by_policy = {(p.policy, dict(p.params)["options.protected_fraction"]): dict(p.options) for p in points}
    assert by_policy[("fairshare", 0.5)] == {}
    assert by_policy[("legacy", 0.5)] == {"protected_fraction": 0.5, "seed": 7}
    frame = sweep(
        "tiny", grid={"options.protected_fraction": [0.0, 0.5]}, policies=["fairshare", "legacy"], days=DAYS
    )
    assert frame["error"].isna().all()
    assert list(frame["options.protected_fraction"]) == [0.0, 0.0, 0.5, 0.5]


def test_an_option_no_policy_takes_is_refused() -> None:
    """An option that none of the sweep's policies takes is bad input, named as such."""
    with pytest.raises(SweepError, match="options.time_limit: no policy of this sweep takes"):
        sweep("tiny", policies=["fairshare"], options={"time_limit": 2})
    with pytest.raises(SweepError, match="options.rel_gap: no policy of this sweep takes"):
        sweep("tiny", grid={"options.rel_gap": [0.1]}, policies=["legacy"])


# -- real simulator: rows, failures -----------------------------------------------------


def test_rows_hold_parameters_and_flattened_simulator_metrics() -> None:
    """Each row has the point's parameters, its policy and the simulator's summary metrics,
    with per-class wait maps flattened into ``wait_p90_s.<class>`` columns."""
    frame = sweep("tiny", grid={"policy.lookback": ["3d", "7d"]}, policies=["fairshare"], days=DAYS)
    assert len(frame) == 2
    assert list(frame["policy.lookback"]) == ["3d", "7d"]
    assert set(frame["policy"]) == {"fairshare"}
    assert frame["error"].isna().all()
    direct = simulate(load_scenario("tiny"), "fairshare", days=DAYS).summary
    flat = flatten_summary(direct)
    assert any(c.startswith("wait_p90_s.") for c in flat)
    for column, value in flat.items():
        if column.startswith("wait_") or column in ("delivered_over_owed", "occupancy"):
            assert frame.loc[1, column] == pytest.approx(value, nan_ok=True), column


def test_a_failing_point_is_reported_and_the_others_run(caplog: pytest.LogCaptureFixture) -> None:
    """A point with an invalid value gets an ``error`` naming the field (also logged), and
    the sweep's other points still produce metrics."""
    with caplog.at_level(logging.WARNING, logger="scenarios.sweep"):
        frame = sweep("tiny", grid={"policy.slices": [0, 2]}, days=DAYS)
    bad, good = frame.iloc[0], frame.iloc[1]
    assert "policy.slices" in bad["error"]
    assert pd.isna(bad["occupancy"])
    assert good["error"] is None or pd.isna(good["error"])
    assert good["occupancy"] > 0
    assert "policy.slices=0" in caplog.text


# -- Dask ---------------------------------------------------------------------------------


def test_dask_sweep_equals_the_serial_sweep(two_workers: Client) -> None:
    """An 8-point sweep on a 2-worker LocalCluster gives the same rows, in the same order,
    as the same sweep run serially in this process."""
    serial = sweep("tiny", grid=GRID8, days=DAYS)
    with get_task_stream(two_workers) as stream:
        parallel = sweep("tiny", grid=GRID8, days=DAYS, client=two_workers)
    assert len(serial) == 8
    assert serial["error"].isna().all()
    pd.testing.assert_frame_equal(results(parallel), results(serial))
    # The points really ran on the cluster, spread over both workers.
    assert len(stream.data) == 8
    assert len({task["worker"] for task in stream.data}) == 2


def test_a_base_goes_to_the_workers_once_for_every_sweep_of_it(
    two_workers: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two sweeps of one base on one client scatter it once; a new base is scattered
    again; the results are those of a sweep that sent its own."""
    from scenarios.sweep import SweepBase, SweepConfig, run_sweep

    scattered: list[object] = []
    real = two_workers.scatter

    def counted(data: Any, *args: Any, **kwargs: Any) -> Any:
        scattered.append(data)
        return real(data, *args, **kwargs)

    monkeypatch.setattr(two_workers, "scatter", counted)
    base = SweepBase.of_scenario(load_scenario("tiny"))
    grid = {"policy.slices": [2, 4]}
    first = run_sweep(SweepConfig(base=base, grid=grid, days=DAYS, client=two_workers)).frame
    second = run_sweep(SweepConfig(base=base, grid=grid, days=DAYS, client=two_workers)).frame
    assert scattered == [base]
    other = SweepBase.of_scenario(load_scenario("tiny"))
    third = run_sweep(SweepConfig(base=other, grid=grid, days=DAYS, client=two_workers)).frame
    assert scattered == [base, other]
    serial = run_sweep(SweepConfig(base=base, grid=grid, days=DAYS)).frame
    for frame in (first, second, third):
        pd.testing.assert_frame_equal(results(frame), results(serial))


def test_points_start_on_dask_in_the_order_given(two_workers: Client, tmp_path: Path) -> None:
    """On 2 workers the points start two at a time in the grid's order: the third starts
    only once one of the first two has ended (a first answer comes from the first)."""
    from scenarios.sweep import SweepBase, SweepConfig, run_sweep

    base = SweepBase.of_scenario(load_scenario("tiny"))
    for sweep_no in range(3):  # the base stays on the workers after the first
        log = tmp_path / f"started-{sweep_no}"
        runner = functools.partial(logged_runner, log=str(log))
        report = run_sweep(SweepConfig(
            base=base, grid={"policy.slices": [1, 2, 3, 4, 6, 8]}, days=DAYS, client=two_workers,
            runner=runner,
        ))
        assert report.frame["error"].isna().all()
        started = [int(x) for x in log.read_text().split()]
        assert [set(started[i:i + 2]) for i in range(0, 6, 2)] == [{1, 2}, {3, 4}, {6, 8}], sweep_no


def test_a_local_cluster_preloads_the_modules_asked_for() -> None:
    """Workers of ``start_local_cluster(preload=...)`` have imported those modules."""
    from scenarios.sweep import start_local_cluster

    def loaded() -> bool:
        return "planner.simulator.engine" in sys.modules

    with start_local_cluster(1, preload=("planner.simulator.engine",)) as cluster, Client(cluster) as client:
        assert list(client.run(loaded).values()) == [True]


def test_a_killed_worker_does_not_lose_points(two_workers: Client, tmp_path: Path) -> None:
    """A worker process killed mid-point, after other points ran, has that point rerun on
    a live worker: all 8 results arrive, equal to a serial run."""
    marker, calls = tmp_path / "killed", tmp_path / "calls"
    calls.mkdir()
    runner = functools.partial(kill_once_runner, marker=str(marker), calls=str(calls))
    frame = sweep("tiny", grid=GRID8, days=DAYS, client=two_workers, runner=runner, out=tmp_path / "out")
    killed_pid = int(marker.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(killed_pid, 0)  # the worker really died
    # The killed point started again; so may points whose results sat in the dead worker's
    # memory, not yet fetched.
    assert len(os.listdir(calls)) >= 9
    assert frame["error"].isna().all()
    pd.testing.assert_frame_equal(results(frame), results(sweep("tiny", grid=GRID8, days=DAYS)))
    assert len(list((tmp_path / "out" / "points").glob("*.parquet"))) == 8


# -- resume -------------------------------------------------------------------------------


def test_rerun_after_interruption_resumes(tmp_path: Path) -> None:
    """A sweep stopped by Ctrl-C after 3 points keeps them; the rerun computes only the
    other 5 and returns all 8, equal to an uninterrupted sweep."""
    out = tmp_path / "out"
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    with pytest.raises(KeyboardInterrupt):
        sweep("tiny", grid=GRID8, days=DAYS, out=out,
              runner=functools.partial(counting_runner, calls=str(first), stop_after=3))
    assert len(list((out / "points").glob("*.parquet"))) == 3
    assert len(pd.read_csv(out / "results.csv")) == 3  # what finished is readable at once
    frame = sweep("tiny", grid=GRID8, days=DAYS, out=out,
                  runner=functools.partial(counting_runner, calls=str(second)))
    assert len(os.listdir(second)) == 5
    assert len(frame) == 8
    pd.testing.assert_frame_equal(results(frame), results(sweep("tiny", grid=GRID8, days=DAYS)))
    assert len(pd.read_parquet(out / "results.parquet")) == 8


def test_failed_points_are_retried_on_rerun(tmp_path: Path) -> None:
    """A rerun skips the points that ran and retries only the ones that failed."""
    out = tmp_path / "out"
    calls = tmp_path / "calls"
    calls.mkdir()
    grid = {"policy.slices": [2, 4]}
    first = sweep("tiny", grid=grid, days=DAYS, out=out, runner=failing_runner)
    assert "RuntimeError: slices=2" in first.loc[0, "error"]
    assert first.loc[1, "error"] is None
    again = sweep("tiny", grid=grid, days=DAYS, out=out,
                  runner=functools.partial(counting_runner, calls=str(calls)))
    assert len(os.listdir(calls)) == 1
    assert again["error"].isna().all()
    assert pd.read_csv(out / "results.csv")["error"].isna().all()


def test_a_spec_object_runs_like_the_arguments() -> None:
    """``sweep(SweepConfig(...))`` gives the frame of the same sweep given as arguments."""
    grid = {"policy.lookback": ["3d", "7d"]}
    by_args = sweep("tiny", grid, days=DAYS, runner=echo_runner)
    by_spec = sweep(SweepConfig(base="tiny", grid=grid, days=DAYS, runner=echo_runner))
    columns = [c for c in by_args.columns if c != ELAPSED_COLUMN]
    pd.testing.assert_frame_equal(by_args[columns], by_spec[columns])


def test_a_spec_object_comes_alone() -> None:
    """A SweepConfig with other arguments besides is refused rather than half used."""
    with pytest.raises(TypeError, match="SweepConfig alone"):
        sweep(SweepConfig(base="tiny"), days=1.0)


def test_run_sweep_takes_the_spec_object_only() -> None:
    """The argument form is sweep()'s alone: run_sweep given a scenario says so."""
    with pytest.raises(TypeError, match="run_sweep takes a SweepConfig, not str"):
        run_sweep("tiny")  # type: ignore[arg-type]


def test_kept_results_and_hours_reach_the_caller() -> None:
    """With keep, each point's whole result comes back; on_point hears every point and
    on_hours the simulated hours of a runner that takes a progress callable."""
    heard: list[tuple[str, float, float]] = []
    points: list[str] = []
    report = run_sweep(
        SweepConfig(
            base=TINY, grid={"policy.slices": [2, 4]}, days=DAYS, runner=hours_runner, keep=True,
            on_point=lambda row, result: points.append(str(row["point"])),
            on_hours=lambda key, done, total: heard.append((key, done, total)),
        )
    )
    keys = list(report.frame["point"])
    assert sorted(points) == sorted(keys) and set(report.results) == set(keys)
    assert report.results[keys[0]].summary["slices"] == 2
    assert {(k, d, t) for k, d, t in heard if d == t} == {(k, 24.0, 24.0) for k in keys}


def test_hours_come_back_from_dask_workers(two_workers: Client) -> None:
    """On Dask, the workers' simulated hours are passed on to on_hours in this process."""
    heard: list[tuple[str, float, float]] = []
    report = run_sweep(
        SweepConfig(
            base=TINY, grid={"policy.slices": [2, 4]}, days=DAYS, runner=hours_runner,
            client=two_workers, on_hours=lambda key, done, total: heard.append((key, done, total)),
        )
    )
    assert {k for k, d, t in heard if d == t} == set(report.frame["point"])


def lanes_runner(scenario: Scenario, policy: str, *, days: float | None = None, **options: Any) -> Any:
    """Report the ``lanes`` option the point was run with (0: none given)."""
    return SimpleNamespace(summary={"lanes": options.get("lanes", 0)})


def test_mip_points_on_dask_plan_in_one_lane_unless_told(two_workers: Client) -> None:
    """Points run side by side on the workers already take the cores: a ``mip`` point
    there plans a decomposed epoch in one process (``lanes=1``), not one per core; run
    in this process it keeps the planner's default; a ``lanes`` option wins."""
    def lanes(client: Client | None, options: dict[str, Any] | None = None) -> dict[str, int]:
        report = run_sweep(SweepConfig(base=TINY, policies=["mip", "fairshare"], days=DAYS,
                                       runner=lanes_runner, client=client, options=options))
        return dict(zip(report.frame["policy"], report.frame["lanes"], strict=True))

    assert lanes(two_workers) == {"mip": 1, "fairshare": 0}
    assert lanes(None) == {"mip": 0, "fairshare": 0}
    assert lanes(two_workers, {"lanes": 2})["mip"] == 2


def test_a_progress_flag_is_not_given_a_callable() -> None:
    """Only a runner whose progress takes a callable is handed one."""
    assert takes_progress_callable(hours_runner)
    assert not takes_progress_callable(echo_runner)


def test_a_loaded_scenario_base_runs_as_is_without_edits() -> None:
    """A point with no scenario edit runs the loaded scenario itself, not a re-validated copy."""
    scenario = load_scenario("tiny")
    base = SweepBase.of_scenario(scenario, "fixed")
    (point,) = expand(base, {"options.x": [1]}, ["fairshare"])
    from scenarios.sweep import point_scenario

    assert point_scenario(base, point) is scenario
    assert base.fingerprint == "fixed"


# -- unwritable results, values Parquet cannot store, bad scale factors, empty out -------

MIXED_MAINTENANCE = [  # `start` a number in one window and text in the other: no Parquet type
    {"cluster": "alpha", "nodes": 1, "start": 7200, "duration": "4h"},
    {"cluster": "beta", "nodes": 1, "start": "1h", "duration": "1h"},
]


def leftovers(out: Path) -> list[str]:
    """Temporary files left in the result folder or its points folder."""
    return [p.name for p in [*out.glob(".*"), *(out / "points").glob(".*")]]


@pytest.mark.parametrize("name", ["results.csv", "results.parquet"])
def test_a_folder_in_place_of_a_combined_file_is_refused_before_running(tmp_path: Path, name: str) -> None:
    """A folder where a combined file goes fails the sweep up front, naming the folder and
    the file, before any point runs."""
    out = tmp_path / "out"
    (out / name).mkdir(parents=True)
    calls = tmp_path / "calls"
    calls.mkdir()
    with pytest.raises(SweepError, match=f"cannot write {name}: it is a folder") as info:
        sweep("tiny", grid={"policy.slices": [2, 4]}, days=0.05, out=out,
              runner=functools.partial(counting_runner, calls=str(calls)))
    assert str(info.value).startswith(f"{out}: ")
    assert os.listdir(calls) == []


def test_combined_files_that_cannot_be_written_at_the_end_are_a_sweep_error(tmp_path: Path) -> None:
    """A combined file that turns unwritable while the points run is a SweepError naming
    it, not an OSError; the points are saved all the same."""
    out = tmp_path / "out"

    def block(row: dict[str, Any], result: Any) -> None:
        (out / "results.csv").mkdir(exist_ok=True)

    spec = SweepConfig(base=TINY, grid={"policy.slices": [2, 4]}, days=0.05, out=out,
                       runner=echo_runner, on_point=block)
    with pytest.raises(SweepError, match="cannot write results.csv: Is a directory") as info:
        run_sweep(spec)
    assert str(info.value).startswith(f"{out}: ")
    assert len(list((out / "points").glob("*.parquet"))) == 2
    assert leftovers(out) == []


def test_a_point_file_that_cannot_be_written_stops_the_sweep_with_a_sweep_error(tmp_path: Path) -> None:
    """A point whose file cannot be written stops the sweep with an error naming the file;
    the points before it are kept, in their files and the combined ones, and no temporary
    file is left."""
    out = tmp_path / "out"
    first, second = expand(TINY, {"policy.slices": [2, 4]}, ["fairshare"], days=0.05)
    (out / "points" / f"{second.key}.parquet").mkdir(parents=True)
    with pytest.raises(SweepError, match=f"cannot write points/{second.key}.parquet: Is a directory"):
        sweep("tiny", grid={"policy.slices": [2, 4]}, days=0.05, out=out, runner=echo_runner)
    assert (out / "points" / f"{first.key}.parquet").is_file()
    assert first.key in set(pd.read_csv(out / "results.csv")["point"])
    assert leftovers(out) == []


def test_a_failed_write_leaves_no_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A point file whose writing fails halfway (a full disk) is a SweepError with the
    system's reason, and its temporary file is removed."""
    import errno

    from scenarios.sweep import store

    def full_disk(frame: pd.DataFrame, target: Any) -> None:
        target.write(b"PAR1 half a file")
        raise OSError(errno.ENOSPC, "No space left on device")

    out = tmp_path / "out"
    monkeypatch.setattr(store, "_to_parquet", full_disk)
    with pytest.raises(SweepError, match=r"cannot write points/\w+\.parquet: No space left on device"):
        sweep("tiny", grid={"policy.slices": [2]}, days=0.05, out=out, runner=echo_runner)
    assert list((out / "points").iterdir()) == []


def test_a_grid_value_parquet_cannot_store_is_saved_with_its_point(tmp_path: Path) -> None:
    """A maintenance list mixing a number and text in one field runs and is saved (as its
    JSON text), with no temporary file left behind."""
    out = tmp_path / "out"
    frame = sweep("tiny", grid={"maintenance": [MIXED_MAINTENANCE]}, days=0.05, out=out)
    assert frame["error"].isna().all()
    (saved,) = (out / "points").glob("*.parquet")
    row = pd.read_parquet(saved).iloc[0]
    assert json.loads(row["maintenance"]) == MIXED_MAINTENANCE
    assert json.loads(pd.read_parquet(out / "results.parquet").loc[0, "maintenance"]) == MIXED_MAINTENANCE
    assert leftovers(out) == []


def test_a_rerun_gives_back_the_grid_values_parquet_cannot_store(tmp_path: Path) -> None:
    """A rerun skips such a point and returns its grid values as given, not as stored."""
    out = tmp_path / "out"
    calls = tmp_path / "calls"
    calls.mkdir()
    grid = {"maintenance": [MIXED_MAINTENANCE], "policy.slices": [2, 4]}
    first = sweep("tiny", grid=grid, days=0.05, out=out, runner=echo_runner)
    again = sweep("tiny", grid=grid, days=0.05, out=out, runner=functools.partial(counting_runner, calls=str(calls)))
    assert os.listdir(calls) == []
    assert list(again["maintenance"]) == [MIXED_MAINTENANCE, MIXED_MAINTENANCE]
    pd.testing.assert_frame_equal(results(again), results(first))


def test_a_failed_point_with_a_value_parquet_cannot_store_is_saved(tmp_path: Path) -> None:
    """A node count written as ``[1, "a"]`` fails its own point, and that row is saved."""
    out = tmp_path / "out"
    key = "clusters.alpha.node_groups[0].nodes"
    frame = sweep("tiny", grid={key: [[1, "a"]]}, days=0.05, out=out)
    assert "clusters[0].node_groups[0].nodes" in frame.loc[0, "error"]
    (saved,) = (out / "points").glob("*.parquet")
    assert pd.read_parquet(saved).loc[0, "error"] == frame.loc[0, "error"]
    assert leftovers(out) == []


@pytest.mark.parametrize(
    "factor",
    [float("inf"), 1.0e308, float("nan"), -1.5, 0, 10**400],
    ids=["inf", "1e308", "nan", "negative", "zero", "10**400"],
)
def test_a_scale_factor_out_of_range_fails_only_its_own_point(factor: float) -> None:
    """An infinite, overflowing, NaN, negative or zero scale factor is the point's error
    (naming the key), never an exception; the grid's good factor still runs."""
    frame = sweep("tiny", grid={"clusters.alpha.scale": [factor, 1.5]}, runner=echo_runner)
    assert "clusters.alpha.scale" in frame.loc[0, "error"]
    assert frame.loc[1, "error"] is None
    assert frame.loc[1, "alpha_nodes"] > 0


def test_an_empty_out_is_refused() -> None:
    """``out=""`` is bad input, not the current folder."""
    with pytest.raises(SweepError, match="out: must not be empty"):
        sweep("tiny", grid={"policy.slices": [2]}, out="", runner=echo_runner)

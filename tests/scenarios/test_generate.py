"""The synthetic workload generator (``scenarios.generate``)."""

from __future__ import annotations

from collections import Counter
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models import GenerateSpec, Job, JobKind, Policy, Scenario
from scenarios import load_scenario
from scenarios.generate import generate_jobs

DAY = 86400.0


@cache
def ai2() -> Scenario:
    """The bundled ai2-like scenario (its clusters and org tree drive the generator)."""
    return load_scenario("ai2-like")


@cache
def week(seed: int = 7) -> tuple[Job, ...]:
    """A generated week on the ai2-like clusters, without backlog."""
    return tuple(generate_jobs(ai2(), GenerateSpec(seed=seed, days=7, load=1.0, users=150)))


def with_jobs(scenario: Scenario, jobs: list[Job] | tuple[Job, ...]) -> Scenario:
    """``scenario`` with ``jobs`` inline, through full validation."""
    data = scenario.model_dump(mode="python", exclude={"workloads"})
    data["workloads"] = {"jobs": list(jobs)}
    return Scenario.model_validate(data)


def capacity_gpus(scenario: Scenario) -> int:
    return sum(scenario.pool_gpus().values())


def test_same_seed_same_jobs() -> None:
    """The same scenario and spec give exactly the same jobs."""
    spec = GenerateSpec(seed=3, days=2, load=0.8, users=60)
    assert generate_jobs(ai2(), spec) == generate_jobs(ai2(), spec)


def test_different_seed_different_jobs() -> None:
    """Another seed gives another workload."""
    a = generate_jobs(ai2(), GenerateSpec(seed=3, days=2, load=0.8, users=60))
    b = generate_jobs(ai2(), GenerateSpec(seed=4, days=2, load=0.8, users=60))
    assert [(j.submit, j.gpus, j.duration) for j in a] != [(j.submit, j.gpus, j.duration) for j in b]


def test_jobs_pass_scenario_validation() -> None:
    """Every generated job passes the scenario's checks (gang fits, contract cap, ids)."""
    scenario = with_jobs(ai2(), week())
    assert len(scenario.jobs) == len(week())


def test_ids_in_submit_order_and_times_whole_seconds() -> None:
    """Ids are g00000... in submit order; submit, duration and min_runtime are whole seconds."""
    jobs = week()
    assert [j.id for j in jobs] == [f"g{i:05d}" for i in range(len(jobs))]
    assert all(a.submit <= b.submit for a, b in zip(jobs, jobs[1:], strict=False))
    for j in jobs:
        assert j.duration is not None
        assert j.submit == int(j.submit) and j.duration == int(j.duration)
        assert j.min_runtime == int(j.min_runtime)
        assert 0 <= j.submit < 7 * DAY


def test_load_matches_spec() -> None:
    """Offered GPU-time / (capacity x days) is close to ``load`` (classes cut near target)."""
    jobs = week()
    work = sum(j.gpus * (j.duration or 0.0) for j in jobs)
    offered = work / (capacity_gpus(ai2()) * 7 * DAY)
    assert offered == pytest.approx(1.0, abs=0.08)


def test_load_scales_job_count() -> None:
    """Half the load gives about half the jobs."""
    full = generate_jobs(ai2(), GenerateSpec(seed=5, days=3, load=1.0))
    half = generate_jobs(ai2(), GenerateSpec(seed=5, days=3, load=0.5))
    assert 0.4 < len(half) / len(full) < 0.6


def test_week_size_is_simulable() -> None:
    """A week at load 1 on the ai2-like clusters has 8k-20k jobs."""
    assert 8_000 <= len(week()) <= 20_000


def test_debug_jobs_are_many_small_and_short() -> None:
    """Most jobs are debug: at most 8 GPUs, minimum runtime at most 15 min, short, not resumable."""
    jobs = week()
    debug = [j for j in jobs if j.kind == JobKind.DEBUG]
    assert len(debug) / len(jobs) > 0.6
    assert all(j.gpus <= 8 and 0 < j.min_runtime <= 900 for j in debug)
    assert all(j.duration is not None and j.duration <= 2 * 3600 for j in debug)
    assert not any(j.resumable for j in debug)


def test_pretraining_gangs_present() -> None:
    """A few 64-512 GPU gangs, multiples of 8, long, resumable, with a 1-4 h contract."""
    jobs = week()
    pretrain = [j for j in jobs if j.gpus >= 128]
    assert 3 <= len(pretrain) <= 100
    # Sizes come in blocks that follow the weights, so the rare 512s are never missing.
    assert {j.gpus for j in pretrain} == {128, 256, 512}
    for j in pretrain:
        assert j.gpus % 8 == 0 and j.resumable
        assert 3600 <= j.min_runtime <= 4 * 3600
        assert j.duration is not None and j.duration >= 12 * 3600


def test_unallocated_share_of_gpu_time() -> None:
    """Unallocated work (minimum runtime 0) is about 18% of the GPU-time and all resumable."""
    jobs = week()
    free = [j for j in jobs if j.min_runtime == 0]
    share = sum(j.gpus * (j.duration or 0.0) for j in free) / sum(
        j.gpus * (j.duration or 0.0) for j in jobs
    )
    assert 0.13 < share < 0.23
    assert all(j.resumable and j.gpus > 8 and j.kind == JobKind.BATCH for j in free)


def test_batch_jobs_in_the_8_to_64_range() -> None:
    """Batch jobs with a contract are mostly 8-64 GPUs, running for hours."""
    batch = [j for j in week() if j.kind == JobKind.BATCH and j.min_runtime > 0 and j.gpus <= 64]
    assert batch
    assert sum(8 <= j.gpus <= 64 for j in batch) / len(batch) > 0.8
    assert all(j.min_runtime >= 1800 for j in batch)


def test_interactive_sessions_protected() -> None:
    """Interactive sessions exist, are not resumable and are protected up to the policy cap."""
    sessions = [j for j in week() if j.kind == JobKind.INTERACTIVE]
    assert sessions
    cap = ai2().policy.max_min_runtime
    for j in sessions:
        assert not j.resumable and j.gpus <= 8
        assert j.min_runtime == min(j.duration or 0.0, cap)


def test_priorities_mostly_zero_and_a_few_urgent() -> None:
    """Most priorities are 0, some are not, and a few jobs are urgent."""
    jobs = week()
    prio = Counter(j.priority for j in jobs)
    assert 0.8 < prio[0] / len(jobs) < 0.9
    assert set(prio) == {-1, 0, 1, 2, 3}
    urgent = sum(j.urgent for j in jobs)
    assert 0 < urgent < 0.02 * len(jobs)


def test_restrictions_for_a_fraction_of_jobs() -> None:
    """Some jobs need a GPU type (e.g. B200) or a cluster; most may run anywhere."""
    jobs = week()
    typed = [j for j in jobs if j.gpu_types is not None]
    pinned = [j for j in jobs if j.clusters is not None]
    assert 0.05 < len(typed) / len(jobs) < 0.2
    assert 0.01 < len(pinned) / len(jobs) < 0.08
    assert {t for j in typed for t in j.gpu_types or ()} == {"H100", "B200", "B300"}


def test_users_have_one_project_and_demand_is_uneven() -> None:
    """Each user works in one project; a few projects carry much of the GPU-time."""
    jobs = week()
    homes: dict[str, set[str]] = {}
    for j in jobs:
        homes.setdefault(j.user, set()).add(j.project)
    assert all(len(p) == 1 for p in homes.values())
    assert 100 <= len(homes) <= 150
    per_project = Counter[str]()
    for j in jobs:
        per_project[j.project] += int(j.gpus * (j.duration or 0.0))
    top5 = sum(v for _, v in per_project.most_common(5))
    assert top5 / sum(per_project.values()) > 0.4


def test_daily_and_weekly_cycle() -> None:
    """Debug work arrives more in working hours than at night, and more on weekdays."""
    debug = [j for j in week() if j.kind == JobKind.DEBUG]
    hour = [(j.submit % DAY) / 3600 for j in debug]
    day_count = sum(10 <= h < 18 for h in hour)
    night_count = sum(h < 4 or h >= 22 for h in hour)
    assert day_count > 2 * night_count
    weekday = sum(j.submit < 5 * DAY for j in debug) / 5
    weekend = sum(j.submit >= 5 * DAY for j in debug) / 2
    assert weekday > 1.5 * weekend


def test_backlog_queued_at_start() -> None:
    """``backlog`` adds work at time 0 of about that much capacity-time, none of it debug."""
    spec = GenerateSpec(seed=2, days=2, load=0.5, backlog="12h")
    jobs = generate_jobs(ai2(), spec)
    at_zero = [j for j in jobs if j.submit == 0]
    work = sum(j.gpus * (j.duration or 0.0) for j in at_zero)
    # Backlog is batch + pretrain + unallocated: 91.5% of 12 h of the capacity.
    assert work / (capacity_gpus(ai2()) * 12 * 3600) == pytest.approx(0.915, abs=0.2)
    assert not any(j.kind in (JobKind.DEBUG, JobKind.INTERACTIVE) for j in at_zero)


def test_small_scenario_falls_back_to_gangs_that_fit() -> None:
    """On the tiny scenario (32 H100s, 16 B200s) pretraining uses the largest gang that fits."""
    tiny = load_scenario("tiny")
    jobs = generate_jobs(tiny, GenerateSpec(seed=1, days=7, load=1.0, users=10))
    with_jobs(tiny, jobs)  # raises if a gang fits no pool
    assert max(j.gpus for j in jobs) == 32


def test_min_runtime_capped_by_policy() -> None:
    """No generated contract exceeds the policy's max_min_runtime."""
    data = load_scenario("tiny").model_dump(mode="python", exclude={"workloads"})
    data["policy"] = Policy(max_min_runtime=1800.0)
    capped = Scenario.model_validate(data)
    jobs = generate_jobs(capped, GenerateSpec(seed=1, days=3))
    assert max(j.min_runtime for j in jobs) == 1800.0
    with_jobs(capped, jobs)


@settings(derandomize=True, max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    days=st.floats(0.1, 3.0),
    load=st.floats(0.05, 2.0),
    users=st.integers(1, 40),
)
def test_any_spec_gives_valid_jobs(seed: int, days: float, load: float, users: int) -> None:
    """Whatever the spec, the jobs validate on the tiny scenario and submit within ``days``."""
    tiny = load_scenario("tiny")
    jobs = generate_jobs(tiny, GenerateSpec(seed=seed, days=days, load=load, users=users))
    with_jobs(tiny, jobs)
    assert all(0 <= j.submit < days * DAY for j in jobs)
    assert len({j.user for j in jobs}) <= users

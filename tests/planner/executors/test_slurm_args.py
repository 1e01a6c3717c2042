"""The slurm executor without Slurm: argument lists, output parsing, retries."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models import Scenario
from planner.executors.hostlist import expand_hostlist
from planner.executors.slurm import (
    CommandResult,
    SlurmCommandError,
    SlurmExecutor,
    SlurmUnavailable,
    create,
    parse_comment,
    parse_gres,
)


class FakeSlurm:
    """Answers squeue/sinfo with canned JSON and records every command."""

    def __init__(self, jobs: list[dict[str, object]], nodes: list[dict[str, object]]) -> None:
        self.jobs, self.nodes = jobs, nodes
        self.calls: list[list[str]] = []
        self.down_for = 0

    def __call__(self, args: Sequence[str]) -> CommandResult:
        self.calls.append(list(args))
        if self.down_for > 0:
            self.down_for -= 1
            return CommandResult(tuple(args), 1, "", "slurm_load_jobs error: Unable to contact slurm controller (connect failure)")
        if args[0] == "squeue":
            return CommandResult(tuple(args), 0, json.dumps({"errors": [], "jobs": self.jobs}))
        if args[0] == "sinfo":
            return CommandResult(tuple(args), 0, json.dumps({"errors": [], "nodes": self.nodes}))
        return CommandResult(tuple(args), 0, "42\n" if args[0] == "sbatch" else "")


NODES_0038 = [
    {"name": "alpha-h100-000", "state": "idle", "state_flags": [], "gres": "gpu:h100:8",
     "partitions": ["gpuplan"], "reason": ""},
    {"name": "alpha-h100-001", "state": "mixed", "state_flags": ["DRAIN"], "gres": "gpu:h100:8(S:0-1)",
     "partitions": ["gpuplan"], "reason": "repair"},
    {"name": "beta-b200-000", "state": "idle", "state_flags": [], "gres": "gpu:b200:8",
     "partitions": ["other"], "reason": ""},
]


def test_sbatch_submits_held_with_contract_in_comment(scenario: Scenario) -> None:
    """sbatch gets a held job named like the planner's, contract in the comment, one argument each."""
    ex = SlurmExecutor(scenario)
    jobs = {j.id: j for j in scenario.jobs}
    assert ex.sbatch_args(jobs["short"]) == [
        "sbatch", "--parsable", "--hold", "--job-name=short", "--partition=gpuplan",
        "--comment=gpuplan job=short project=nlp min_runtime=2 resumable=1", "--requeue",
        "--nodes=1", "--gres=gpu:8", "--output=/dev/null", "--wrap=sleep 3600",
    ]
    gang = ex.sbatch_args(jobs["gang"])
    assert "--nodes=2" in gang and "--gres=gpu:8" in gang
    assert "--no-requeue" in ex.sbatch_args(jobs["stubborn"])


def test_start_pins_then_releases_with_native_node_names(scenario: Scenario) -> None:
    """A start updates NodeList (mapped to Slurm's names) and StartTime, then releases."""
    ex = SlurmExecutor(scenario, node_map={"alpha-h100-000": "gpu-a0", "alpha-h100-001": "gpu-a1"})
    assert ex.start_args("7", ("alpha-h100-000", "alpha-h100-001"), rehold=True) == [
        ["scontrol", "hold", "7"],
        ["scontrol", "update", "JobId=7", "NumNodes=2", "NodeList=gpu-a0,gpu-a1", "StartTime=now"],
        ["scontrol", "release", "7"],
    ]
    assert ex.preempt_args("7") == ["scontrol", "requeuehold", "7"]
    assert ex.drain_args("alpha-h100-000", "psu") == [
        "scontrol", "update", "NodeName=gpu-a0", "State=DRAIN", "Reason=psu"
    ]


def test_observe_reads_openapi_0038(scenario: Scenario) -> None:
    """Slurm 22.05 output: held, running and foreign jobs, drained nodes, names mapped back."""
    jobs = [
        {"job_id": 5, "name": "short", "comment": "", "partition": "gpuplan",
         "job_state": "PENDING", "state_reason": "JobHeldUser", "priority": 0,
         "tres_per_node": "gres:gpu:8", "node_count": 1, "nodes": "", "required_nodes": ""},
        {"job_id": 6, "name": "x", "comment": "gpuplan job=gang project=nlp min_runtime=60 resumable=1",
         "partition": "gpuplan", "job_state": "RUNNING", "state_reason": "None", "priority": 10,
         "tres_per_node": "gres:gpu:h100:8", "node_count": 2, "nodes": "gpu-a[0-1]",
         "required_nodes": "gpu-a[0-1]", "start_time": 1000, "restart_cnt": 1},
        {"job_id": 7, "name": "theirs", "comment": "", "partition": "other", "job_state": "RUNNING",
         "tres_per_job": "gres:gpu:2", "node_count": 1, "nodes": "beta-b200-000", "start_time": 5},
    ]
    fake = FakeSlurm(jobs, NODES_0038)
    ex = SlurmExecutor(scenario, runner=fake, clock=lambda: 2000.0,
                       node_map={"alpha-h100-000": "gpu-a0", "alpha-h100-001": "gpu-a1"})
    fake.nodes = [dict(n, name={"alpha-h100-000": "gpu-a0", "alpha-h100-001": "gpu-a1"}.get(str(n["name"]), n["name"])) for n in NODES_0038]
    state = ex.observe()
    assert [n.name for n in state.nodes] == ["alpha-h100-000", "alpha-h100-001"]  # partition gpuplan only
    assert [(n.gpu_type, n.gpus, n.drained) for n in state.nodes] == [("H100", 8, False), ("H100", 8, True)]
    short, gang, theirs = state.jobs
    assert (short.job, short.phase, short.managed, short.gpus, short.min_runtime) == ("short", "held", True, 8, 2.0)
    assert (gang.job, gang.phase, gang.nodes, gang.gpus, gang.run_start, gang.restarts) == (
        "gang", "running", ("alpha-h100-000", "alpha-h100-001"), 16, 1000.0, 1)
    assert gang.min_runtime == 60.0 and gang.project == "nlp"
    assert (theirs.managed, theirs.gpus, theirs.min_runtime) == (False, 2, None)
    # Both ways: planner name -> Slurm id and back.
    assert state.job("gang").native_id == "6" and state.by_native_id("6").job == "gang"
    assert state.by_native_id("404") is None
    assert state.at == 2000.0


def test_observe_reads_openapi_0040_shapes(scenario: Scenario) -> None:
    """Newer Slurm output (state lists, numbers as {set, number}) reads the same way."""
    jobs = [{"job_id": 9, "name": "free", "comment": "", "partition": "gpuplan",
             "job_state": ["RUNNING"], "priority": {"set": True, "infinite": False, "number": 5},
             "tres_per_node": "gres/gpu:4", "node_count": {"set": True, "number": 1},
             "nodes": "alpha-h100-000", "start_time": {"set": True, "number": 77}},
            {"job_id": 10, "name": "short", "partition": "gpuplan", "job_state": ["PENDING"],
             "priority": {"set": True, "number": 0}, "tres_per_node": "gres/gpu:8"}]
    nodes = [{"name": "alpha-h100-000", "state": ["IDLE", "DRAIN"], "gres": "gpu:h100:8",
              "partitions": ["gpuplan"]}]
    state = SlurmExecutor(scenario, runner=FakeSlurm(jobs, nodes)).observe()
    free, short = state.jobs
    assert (free.phase, free.gpus, free.run_start, free.resumable) == ("running", 4, 77.0, True)
    assert short.phase == "held"
    assert state.nodes[0].drained


def test_unreachable_controller_is_retried_with_doubling_waits(scenario: Scenario) -> None:
    """Connection failures are retried with waits 0.5, 1, 2, 2 (capped); then it works."""
    fake = FakeSlurm([], [])
    fake.down_for = 4
    waits: list[float] = []
    ex = SlurmExecutor(scenario, runner=fake, sleep=waits.append, retries=5, backoff=0.5, max_backoff=2.0)
    ex.observe()
    assert waits == [0.5, 1.0, 2.0, 2.0]


def test_gives_up_after_the_last_retry(scenario: Scenario) -> None:
    """With the controller down for longer than the retries, SlurmUnavailable is raised."""
    fake = FakeSlurm([], [])
    fake.down_for = 100
    ex = SlurmExecutor(scenario, runner=fake, sleep=lambda s: None, retries=2)
    with pytest.raises(SlurmUnavailable, match="unreachable after 3 attempts"):
        ex.observe()
    assert len(fake.calls) == 3


def test_json_errors_with_exit_code_zero_are_retried(scenario: Scenario) -> None:
    """squeue --json exits 0 with an 'errors' list when slurmctld is down: that is retried."""
    answers = [
        CommandResult((), 0, json.dumps({"errors": [{"error": "Unspecified error"}], "nodes": []})),
        CommandResult((), 0, json.dumps({"errors": [], "nodes": NODES_0038})),
        CommandResult((), 0, json.dumps({"errors": [], "jobs": []})),
    ]
    ex = SlurmExecutor(scenario, runner=lambda args: answers.pop(0), sleep=lambda s: None)
    assert len(ex.observe().nodes) == 2


def test_non_json_output_is_a_clear_error(scenario: Scenario) -> None:
    """A Slurm without --json support gives an error naming the command and the need."""
    ex = SlurmExecutor(scenario, runner=lambda args: CommandResult(tuple(args), 0, "JOBID NAME\n"))
    with pytest.raises(SlurmCommandError, match="sinfo --all --json: output is not JSON.*21.08"):
        ex.observe()


def test_failed_command_is_reported_not_raised(scenario: Scenario, plans: Any) -> None:
    """A scontrol that fails marks that action failed with Slurm's message; apply goes on."""
    jobs = [{"job_id": 5, "name": "free", "partition": "gpuplan", "job_state": "PENDING",
             "priority": 0, "tres_per_node": "gres:gpu:4"},
            {"job_id": 6, "name": "b200", "partition": "gpuplan", "job_state": "PENDING",
             "priority": 0, "tres_per_node": "gres:gpu:8"}]
    fake = FakeSlurm(jobs, NODES_0038[:2] + [dict(NODES_0038[2], partitions=["gpuplan"])])

    def runner(args: Sequence[str]) -> CommandResult:
        if args[:2] == ["scontrol", "update"] and "JobId=5" in args:
            return CommandResult(tuple(args), 1, "", "scontrol: error: Invalid node name specified")
        return fake(args)

    report = SlurmExecutor(scenario, runner=runner).apply(
        plans([{"free": ("alpha-h100-000",), "b200": ("beta-b200-000",)}]), 0)
    assert [(r.job, r.ok) for r in report.results] == [("free", False), ("b200", True)]
    assert report.failed[0].detail.endswith("Invalid node name specified")


def test_parsers() -> None:
    """Comments, gres strings and host lists parse as Slurm writes them."""
    assert parse_comment("gpuplan job=a project=x/y min_runtime=60") == {
        "job": "a", "project": "x/y", "min_runtime": "60"}
    assert parse_comment("gpuplan:") == {} and parse_comment("my notes") is None
    assert parse_gres("gpu:h100:8(S:0-1)") == ("h100", 8)
    assert parse_gres("gres:gpu:4,gres:shard:2") == (None, 4)
    assert parse_gres("(null)") == (None, 0)
    assert expand_hostlist("alpha-h100-[000-002,007],beta-b200-000") == (
        "alpha-h100-000", "alpha-h100-001", "alpha-h100-002", "alpha-h100-007", "beta-b200-000")
    assert expand_hostlist("r[1-2]n[08-09]") == ("r1n08", "r1n09", "r2n08", "r2n09")
    assert expand_hostlist("(null)") == ()
    with pytest.raises(ValueError, match="unbalanced"):
        expand_hostlist("n[1-2")


@settings(derandomize=True, max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 120), min_size=1, max_size=12, unique=True),
       st.integers(1, 4))
def test_hostlist_roundtrip(indices: list[int], width: int) -> None:
    """A bracketed range list expands to exactly the zero-padded names it stands for."""
    indices.sort()
    body = ",".join(str(i).zfill(width) for i in indices)
    names = expand_hostlist(f"node[{body}]")
    assert names == tuple(f"node{str(i).zfill(width)}" for i in indices)


def test_factory_options(scenario: Scenario) -> None:
    """The registry factory reads partition, command, node_map; unknown options are errors."""
    ex = create(scenario, {"partition": "p", "command": "python train.py --steps {duration}",
                           "node_map": "alpha-h100-000=n0"})
    assert ex.partition == "p" and ex.to_native == {"alpha-h100-000": "n0"}
    assert ex.sbatch_args(scenario.jobs[0])[-1] == "--wrap=python train.py --steps 3600"
    with pytest.raises(ValueError, match="unknown option.*colour"):
        create(scenario, {"colour": "red"})


def test_missing_slurm_conf_is_reported_at_once(scenario: Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    """A SLURM_CONF that names no file is an error when the executor is created."""
    monkeypatch.setenv("SLURM_CONF", "/nonexistent/slurm.conf")
    with pytest.raises(ValueError, match="SLURM_CONF=/nonexistent/slurm.conf does not exist"):
        create(scenario, {})


def test_restart_right_after_a_requeue_waits_for_the_grace(scenario: Scenario, plans: Any) -> None:
    """A job requeued half a second ago is started only once two seconds have passed
    since the requeue (slurmd would refuse a launch within the second of the kill)."""
    jobs = [{"job_id": 5, "name": "free", "partition": "gpuplan", "job_state": "PENDING",
             "priority": 0, "tres_per_node": "gres:gpu:4", "restart_cnt": 1, "submit_time": 1000}]
    fake = FakeSlurm(jobs, NODES_0038)
    waits: list[float] = []
    ex = SlurmExecutor(scenario, runner=fake, clock=lambda: 1000.5, sleep=waits.append)
    report = ex.apply(plans([{"free": ("alpha-h100-000",)}]), 0)
    assert report.ok and waits == [1.5]
    assert ex.observe().jobs[0].requeued_at == 1000.0
    fresh = SlurmExecutor(scenario, runner=fake, clock=lambda: 1003.0, sleep=waits.append)
    fresh.apply(plans([{"free": ("alpha-h100-000",)}]), 0)
    assert waits == [1.5]


def _held(job_id: int, name: str, admin_comment: str = "") -> dict[str, object]:
    return {"job_id": job_id, "name": name, "comment": "", "partition": "gpuplan",
            "job_state": "PENDING", "state_reason": "JobHeldUser", "priority": 0,
            "tres_per_node": "gres:gpu:8", "node_count": 1, "nodes": "", "required_nodes": "",
            "admin_comment": admin_comment}


def test_set_reason_updates_the_admin_comment_once_per_text(scenario: Scenario) -> None:
    """set_reason writes AdminComment (never the contract comment) and skips unchanged text."""
    fake = FakeSlurm([_held(5, "short")], NODES_0038)
    ex = SlurmExecutor(scenario, runner=fake)
    ex.observe()
    first = ex.set_reason("short", "waiting: every pool it may use is full")
    again = ex.set_reason("short", "waiting: every pool it may use is full")
    assert (first.ok, first.changed, again.ok, again.changed) == (True, True, True, False)
    updates = [c for c in fake.calls if c[0] == "scontrol"]
    assert updates == [["scontrol", "update", "JobId=5", "AdminComment=waiting: every pool it may use is full"]]


def test_set_reason_trusts_what_slurm_already_shows(scenario: Scenario) -> None:
    """After a restart the text Slurm already holds is not written again."""
    fake = FakeSlurm([_held(5, "short", admin_comment="running preemptible (past its minimum runtime)")], NODES_0038)
    ex = SlurmExecutor(scenario, runner=fake)
    result = ex.set_reason("short", "running preemptible (past its minimum runtime)")
    assert (result.ok, result.changed) == (True, False)
    assert not [c for c in fake.calls if c[0] == "scontrol"]


def test_set_reason_of_an_unknown_job_fails(scenario: Scenario) -> None:
    """A reason for a job Slurm does not have is a failed result naming why."""
    ex = SlurmExecutor(scenario, runner=FakeSlurm([], NODES_0038))
    result = ex.set_reason("nope", "waiting")
    assert (result.ok, result.detail) == (False, "no such job")

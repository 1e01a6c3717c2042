"""A real Slurm for the executor tests: one slurmctld and a few slurmd on loopback.

The ``slurm_cluster`` fixture writes a ``slurm.conf`` for virtual nodes with 8 GPUs each
(gres of type h100 or b200, backed by placeholder files), starts ``slurmctld`` and one
``slurmd -N NAME`` per node, all on 127.0.0.1 with free ports, ``auth/none`` and state
in a temporary directory, and stops them at the end, even when a test fails. It skips
only when the daemons cannot start, and then says why (with the end of their logs).
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from models import (
    Action,
    Assignment,
    Cluster,
    Job,
    NodeGroup,
    OrgUnit,
    Plan,
    Scenario,
    Slice,
    SolverInfo,
    SolveStatus,
    Workloads,
)
from planner.executors.slurm import CommandResult, Runner, subprocess_runner

SLURMCTLD = shutil.which("slurmctld") or "/usr/sbin/slurmctld"
SLURMD = shutil.which("slurmd") or "/usr/sbin/slurmd"

# Planner node names (cluster-gputype-index), used as Slurm node names too.
NODES: tuple[tuple[str, str], ...] = (
    ("alpha-h100-000", "h100"),
    ("alpha-h100-001", "h100"),
    ("beta-b200-000", "b200"),
)
GPUS_PER_NODE = 8
PARTITION = "gpuplan"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class SlurmCluster:
    """A throw-away Slurm in ``root``; :attr:`runner` runs client commands against it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.runner: Runner = subprocess_runner(self.env, timeout=20.0)
        self.ctld: subprocess.Popen[bytes] | None = None
        self.slurmds: list[subprocess.Popen[bytes]] = []
        self._write_config()

    # -- configuration ------------------------------------------------------------------

    def _write_config(self) -> None:
        host = socket.gethostname().split(".")[0]
        user = getpass.getuser()
        for sub in ("state", "spool", "dev", "log"):
            (self.root / sub).mkdir()
        lines = [
            "ClusterName=gpuplantest",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={_free_port()}",
            f"SlurmUser={user}",
            f"SlurmdUser={user}",
            "AuthType=auth/none",
            "CredType=cred/none",
            f"StateSaveLocation={self.root}/state",
            # One spool directory per virtual node (%n), or the slurmds collide.
            f"SlurmdSpoolDir={self.root}/spool/%n",
            f"SlurmctldPidFile={self.root}/slurmctld.pid",
            f"SlurmdPidFile={self.root}/slurmd-%n.pid",
            f"SlurmctldLogFile={self.root}/log/slurmctld.log",
            f"SlurmdLogFile={self.root}/log/slurmd-%n.log",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            # linuxproc notices a job's processes are gone at once; pgid takes ~4 s to complete.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "MpiDefault=none",
            "ReturnToService=2",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "GresTypes=gpu",
            # The virtual nodes claim more CPUs than this host has.
            "SlurmdParameters=config_overrides",
            "SchedulerParameters=sched_interval=1",
            "MinJobAge=600",
            "KillWait=1",
            "InactiveLimit=0",
            "SlurmdTimeout=60",
            "SlurmctldTimeout=60",
            "MessageTimeout=5",
        ]
        gres = []
        for name, gpu_type in NODES:
            (self.root / "spool" / name).mkdir()
            for i in range(GPUS_PER_NODE):
                (self.root / "dev" / f"{name}-gpu{i}").touch()
            lines.append(
                f"NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 Port={_free_port()} "
                f"CPUs=16 RealMemory=1000 Gres=gpu:{gpu_type}:{GPUS_PER_NODE} State=UNKNOWN"
            )
            gres.append(
                f"NodeName={name} Name=gpu Type={gpu_type} "
                f"File={self.root}/dev/{name}-gpu[0-{GPUS_PER_NODE - 1}]"
            )
        lines.append(f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
        # Jobs outside the managed partition are users' own: observed, never touched.
        lines.append("PartitionName=other Nodes=ALL MaxTime=INFINITE State=UP")
        self.conf.write_text("\n".join(lines) + "\n")
        (self.root / "gres.conf").write_text("\n".join(gres) + "\n")

    # -- daemons --------------------------------------------------------------------------

    def start(self) -> None:
        """Start slurmctld and the slurmds; raise RuntimeError with the logs if they fail."""
        self.start_controller()
        for name, _ in NODES:
            out = open(self.root / "log" / f"{name}.out", "wb")  # noqa: SIM115 - lives with the daemon
            self.slurmds.append(subprocess.Popen(
                [SLURMD, "-D", "-N", name, "-f", str(self.conf)],
                env=self.env, stdout=out, stderr=subprocess.STDOUT, cwd=self.root,
            ))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            res = self.run("sinfo", "-h", "-N", "-o", "%N %T")
            states = dict(line.split() for line in res.stdout.splitlines() if line.strip())
            if len(states) == len(NODES) and all(s == "idle" for s in states.values()):
                return
            self._check_alive()
            time.sleep(0.5)
        raise RuntimeError(f"the slurmd nodes did not become idle: {res.stdout.strip()}")

    def start_controller(self) -> None:
        out = open(self.root / "log" / "slurmctld.out", "ab")  # noqa: SIM115 - lives with the daemon
        self.ctld = subprocess.Popen(
            [SLURMCTLD, "-D", "-i", "-f", str(self.conf)],
            env=self.env, stdout=out, stderr=subprocess.STDOUT, cwd=self.root,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.run("scontrol", "ping").stdout.find("UP") >= 0:
                return
            self._check_alive()
            time.sleep(0.3)
        raise RuntimeError("slurmctld did not answer 'scontrol ping'")

    def stop_controller(self) -> None:
        if self.ctld is not None:
            _terminate(self.ctld)
            self.ctld = None

    def _check_alive(self) -> None:
        for proc in [self.ctld, *self.slurmds]:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"{proc.args[0]} exited with code {proc.returncode}")

    def run(self, *args: str) -> CommandResult:
        return self.runner(list(args))

    def log_tail(self, lines: int = 15) -> str:
        out = []
        for path in sorted((self.root / "log").iterdir()):
            text = path.read_text(errors="replace").splitlines()[-lines:]
            if text:
                out.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(out)

    # -- test helpers -----------------------------------------------------------------

    def cancel_all(self) -> None:
        """Cancel every job and wait (a few seconds at most) until none is active."""
        ids = self.run("squeue", "-h", "-o", "%i").stdout.split()
        if ids:
            self.run("scancel", *ids)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            left = self.run("squeue", "-h", "-t", "PD,R,CG,S,CF", "-o", "%i").stdout.split()
            if not left:
                return
            time.sleep(0.3)

    def reset_nodes(self) -> None:
        for name, _ in NODES:
            self.run("scontrol", "update", f"NodeName={name}", "State=RESUME")

    def stop(self) -> None:
        """Stop everything this cluster started, then any job process left behind."""
        if self.ctld is not None and self.ctld.poll() is None:
            self.cancel_all()
        for proc in self.slurmds:
            _terminate(proc)
        self.stop_controller()
        # slurmstepd and job scripts outlive slurmd; they carry our SLURM_CONF.
        marker = f"SLURM_CONF={self.conf}".encode()
        for pid in _pids_with_env(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _pids_with_env(marker: bytes) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """A running Slurm (session-wide: daemons take seconds to start); skips if it cannot start."""
    for binary in (SLURMCTLD, SLURMD):
        if not os.access(binary, os.X_OK):
            pytest.skip(f"Slurm daemons not installed ({binary} missing; apt install slurm-wlm)")
    root = Path(tempfile.mkdtemp(prefix="gpuplan-slurm-"))
    cluster = SlurmCluster(root)
    try:
        try:
            cluster.start()
        except (RuntimeError, OSError) as exc:
            tail = cluster.log_tail()
            cluster.stop()
            pytest.skip(f"Slurm daemons cannot start: {exc}\n{tail}")
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture()
def slurm(slurm_cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    """The shared Slurm with no active job and every node in service when the test starts.

    Cleaning up before each test (not after) is enough for isolation and halves the
    waiting for jobs to stop; the session fixture cancels what the last test left.
    """
    if slurm_cluster.ctld is None or slurm_cluster.ctld.poll() is not None:
        slurm_cluster.start_controller()
    slurm_cluster.cancel_all()
    slurm_cluster.reset_nodes()
    yield slurm_cluster
    if slurm_cluster.ctld is None or slurm_cluster.ctld.poll() is not None:
        # A test that stopped the controller and failed before restarting it.
        slurm_cluster.start_controller()


# -- hand-built scenario and plans shared by the executor tests ----------------------------


def _scenario() -> Scenario:
    return Scenario(
        name="executors",
        clusters=(
            Cluster(name="alpha", node_groups=(NodeGroup(gpu_type="H100", nodes=2),)),
            Cluster(name="beta", node_groups=(NodeGroup(gpu_type="B200", nodes=1),)),
        ),
        org=(OrgUnit(name="nlp", share=2), OrgUnit(name="vision", share=1)),
        workloads=Workloads(jobs=(
            # Free work: preemptible at any time.
            Job(id="free", project="vision", gpus=4, duration=3600, min_runtime=0, resumable=True),
            # Funded, resumable, with a contract short enough to pass inside a test.
            Job(id="short", project="nlp", gpus=8, duration=3600, min_runtime=2, resumable=True),
            # Funded with a long contract: must never be touched while it runs.
            Job(id="contract", project="nlp", gpus=8, duration=3600, min_runtime=3600,
                resumable=True),
            Job(id="gang", project="nlp", gpus=16, duration=3600, min_runtime=2, resumable=True),
            Job(id="b200", project="vision", gpus=8, gpu_types=("B200",), duration=3600,
                min_runtime=2, resumable=True),
            Job(id="stubborn", project="vision", gpus=2, duration=3600, min_runtime=1,
                resumable=False),
        )),
    )


class Plans:
    """Builds a :class:`Plan` from ``[{job: nodes}, ...]`` (one mapping per slice)."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.jobs = {j.id: j for j in scenario.jobs}
        self.nodes = {n.name: n for n in scenario.nodes}

    def __call__(
        self,
        slices: list[dict[str, tuple[str, ...]]],
        *,
        slice_seconds: float = 5.0,
        start: float = 0.0,
        resume: tuple[str, ...] = (),
    ) -> Plan:
        built = []
        for i, chosen in enumerate(slices):
            assignments = []
            for job_id, nodes in chosen.items():
                job, node = self.jobs[job_id], self.nodes[nodes[0]]
                assignments.append(Assignment(
                    job=job_id, project=job.project, cluster=node.cluster,
                    gpu_type=node.gpu_type, nodes=nodes, gpus=job.gpus, charged=job.allocated,
                ))
            built.append(Slice(start=start + i * slice_seconds,
                               end=start + (i + 1) * slice_seconds,
                               assignments=tuple(assignments)))
        actions = tuple(Action(job=j, action="resume", at=start) for j in resume)
        return Plan(
            epoch_start=start, epoch_end=start + len(slices) * slice_seconds,
            slices=tuple(built), actions=actions,
            solver=SolverInfo(backend="hand", status=SolveStatus.OPTIMAL),
        )


@pytest.fixture()
def scenario() -> Scenario:
    """Two H100 nodes in cluster alpha, one B200 node in beta: the fixture's nodes."""
    return _scenario()


@pytest.fixture()
def plans(scenario: Scenario) -> Plans:
    return Plans(scenario)

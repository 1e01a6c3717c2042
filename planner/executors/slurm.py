"""The ``slurm`` executor: carries plans out with Slurm's own commands.

It reads the cluster with ``squeue --json`` and ``sinfo --json`` (Slurm 21.08 and later;
the field shapes of OpenAPI v0.0.37 to v0.0.40 are all understood) and changes it with
``scontrol`` and ``sbatch``, always through argument lists, never a shell string.

Conventions (see ``docs/executors.md``):

- **Managed jobs.** A job is the planner's when it sits in the managed partition
  (``gpuplan`` by default) or its comment starts with ``gpuplan``. Jobs users submit
  that way are adopted; the others are observed (they occupy nodes) and never touched.
- **Names.** The planner's job name is the ``job=`` key of the comment, else the Slurm
  job name. The comment may also carry the contract: ``gpuplan job=j1
  project=research/nlp min_runtime=3600 resumable=1``; missing keys come from the
  scenario's job of that name. A job whose minimum runtime is known nowhere is never
  preempted. Node names are the planner's unless a ``node_map`` says otherwise.
- **Held until planned.** :meth:`SlurmExecutor.submit` uses ``sbatch --hold``; a job
  waits held until a slice starts it.
- **Start** pins the job (``scontrol update JobId=.. NumNodes=.. NodeList=..
  StartTime=now``; ``StartTime`` clears the delay Slurm puts on requeued jobs) and
  releases it (``scontrol release``).
- **Preempt** a resumable job past its minimum runtime is ``scontrol requeuehold``: the
  job goes back to the queue, held. Jobs inside their minimum runtime are never touched.
- **Drained nodes** (drain, draining, down, ...) get no new work.
- When ``slurmctld`` cannot be reached, each command is retried with exponential
  backoff; after the last retry :class:`SlurmUnavailable` is raised.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from models import Job, Plan, Scenario
from planner.executors.hostlist import expand_hostlist, join_hostlist
from planner.executors.protocol import ExecutorUnavailable
from planner.executors.reconcile import Step, reconcile
from planner.executors.state import (
    ActionResult,
    ApplyReport,
    ClusterState,
    JobPhase,
    ObservedJob,
    ObservedNode,
)
from planner.placement import nodes_needed

COMMENT_TAG = "gpuplan"
REQUEUE_GRACE = 2.0
"""Seconds between a job's requeue and its next start (see ``_after_requeue_grace``)."""

# Text Slurm's clients print when slurmctld is down or slow: worth retrying.
_UNREACHABLE = (
    "unable to contact slurm controller",
    "socket timed out",
    "connection refused",
    "zero bytes were transmitted",
    "communication connection failure",
    "slurm_persist_conn_open",
    "timed out",
)
_FINISHED = {
    "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
    "DEADLINE", "OUT_OF_MEMORY", "SPECIAL_EXIT", "REVOKED",
}
_NODE_UNAVAILABLE = {
    "DRAIN", "DRAINED", "DRAINING", "DOWN", "FAIL", "FAILING", "MAINT", "NOT_RESPONDING",
    "FUTURE", "POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN", "REBOOT_REQUESTED",
    "REBOOT_ISSUED", "UNKNOWN", "NO_RESPOND", "INVALID_REG", "INVALID",
}


class SlurmUnavailable(ExecutorUnavailable):
    """``slurmctld`` did not answer, even after retries with backoff."""


class SlurmCommandError(RuntimeError):
    """A Slurm command failed for a reason other than an unreachable controller."""


@dataclass(frozen=True)
class CommandResult:
    """What one command printed and returned."""

    args: tuple[str, ...]
    returncode: int
    stdout: str = ""
    stderr: str = ""


Runner = Callable[[Sequence[str]], CommandResult]
"""Runs one command given as an argument list (injected so tests can record calls)."""


def subprocess_runner(env: Mapping[str, str] | None = None, timeout: float = 30.0) -> Runner:
    """A :data:`Runner` that runs commands with :func:`subprocess.run`, no shell."""

    def run(args: Sequence[str]) -> CommandResult:
        try:
            proc = subprocess.run(
                list(args), capture_output=True, text=True, timeout=timeout,
                env=dict(env) if env is not None else None, check=False,
            )
        except subprocess.TimeoutExpired:
            return CommandResult(tuple(args), 124, "", f"timed out after {timeout:g}s")
        except FileNotFoundError as exc:
            raise SlurmCommandError(f"{args[0]}: not found ({exc.strerror}); is Slurm installed?") from None
        return CommandResult(tuple(args), proc.returncode, proc.stdout, proc.stderr)

    return run


class SlurmExecutor:
    """Applies plans to a Slurm cluster through ``squeue``, ``sinfo``, ``scontrol``, ``sbatch``.

    Parameters
    ----------
    scenario
        The scenario whose jobs (by name) supply contracts that a job's comment leaves
        out, and whose nodes give node sizes for submissions.
    partition
        The managed partition: jobs in it are the planner's.
    runner
        Runs one command; defaults to :func:`subprocess_runner`.
    node_map
        Planner node name -> Slurm node name, where they differ.
    command
        The batch command of submitted jobs, as an argument list; ``{duration}`` (whole
        seconds, one day when unknown) and ``{job}`` are filled in.
    retries, backoff, max_backoff
        A command that cannot reach slurmctld is retried ``retries`` times, waiting
        ``backoff`` seconds, doubling up to ``max_backoff``.
    sleep, clock
        Injected for tests.
    """

    name = "slurm"

    def __init__(
        self,
        scenario: Scenario | None = None,
        *,
        partition: str = "gpuplan",
        runner: Runner | None = None,
        node_map: Mapping[str, str] | None = None,
        command: Sequence[str] = ("sleep", "{duration}"),
        output: str = "/dev/null",
        retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.scenario = scenario
        self.partition = partition
        self.runner = runner or subprocess_runner()
        self.to_native = dict(node_map or {})
        self.from_native = {v: k for k, v in self.to_native.items()}
        self.command = tuple(command)
        self.output = output
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.sleep = sleep
        self.clock = clock
        self._specs: dict[str, Job] = {j.id: j for j in scenario.jobs} if scenario else {}
        # Last observed native id of each managed job, and the AdminComment Slurm holds
        # per native id: set_reason calls scontrol only when the text changes.
        self._native_ids: dict[str, str] = {}
        self._reasons: dict[str, str] = {}

    # -- argument building (pure) ------------------------------------------------------

    def squeue_args(self) -> list[str]:
        """Every job of every partition (others' jobs occupy nodes too), as JSON."""
        return ["squeue", "--all", "--json"]

    def sinfo_args(self) -> list[str]:
        """Every node, hidden partitions included, as JSON."""
        return ["sinfo", "--all", "--json"]

    def sbatch_args(self, job: Job) -> list[str]:
        """``sbatch`` arguments that submit ``job`` held, with its contract in the comment."""
        per_node = self._gpus_per_node(job)
        count = nodes_needed(job.gpus, per_node)
        gres = job.gpus if count == 1 else per_node
        duration = str(int(math.ceil(job.duration))) if job.duration else "86400"
        command = [part.format(duration=duration, job=job.id) for part in self.command]
        return [
            "sbatch", "--parsable", "--hold",
            f"--job-name={job.id}",
            f"--partition={self.partition}",
            f"--comment={contract_comment(job)}",
            "--requeue" if job.resumable else "--no-requeue",
            f"--nodes={count}",
            f"--gres=gpu:{gres}",
            f"--output={self.output}",
            f"--wrap={shlex.join(command)}",
        ]

    def start_args(self, native_id: str, nodes: Sequence[str], *, rehold: bool = False) -> list[list[str]]:
        """Pin a held job to ``nodes`` (planner names) and release it."""
        native = [self.to_native.get(n, n) for n in nodes]
        cmds = [["scontrol", "hold", native_id]] if rehold else []
        cmds.append([
            "scontrol", "update", f"JobId={native_id}", f"NumNodes={len(native)}",
            f"NodeList={join_hostlist(native)}", "StartTime=now",
        ])
        cmds.append(["scontrol", "release", native_id])
        return cmds

    def preempt_args(self, native_id: str) -> list[str]:
        """Requeue a running job and leave it held (its next start is the planner's)."""
        return ["scontrol", "requeuehold", native_id]

    def hold_args(self, native_id: str) -> list[str]:
        """Hold a released job that has not started yet."""
        return ["scontrol", "hold", native_id]

    def suspend_args(self, native_id: str) -> list[str]:
        """Stop a running job in place."""
        return ["scontrol", "suspend", native_id]

    def resume_args(self, native_id: str) -> list[str]:
        """Continue a suspended job where it is."""
        return ["scontrol", "resume", native_id]

    def reason_args(self, native_id: str, text: str) -> list[str]:
        """Show a job's gpuplan state in its AdminComment (``squeue -O admin_comment``)."""
        return ["scontrol", "update", f"JobId={native_id}", f"AdminComment={text}"]

    def drain_args(self, node: str, reason: str) -> list[str]:
        """Drain a node (planner name): running work stays, no new work starts."""
        return ["scontrol", "update", f"NodeName={self.to_native.get(node, node)}",
                "State=DRAIN", f"Reason={reason or 'gpuplan'}"]

    def undrain_args(self, node: str) -> list[str]:
        """Return a drained node to service."""
        return ["scontrol", "update", f"NodeName={self.to_native.get(node, node)}", "State=RESUME"]

    # -- Executor ---------------------------------------------------------------------

    def observe(self) -> ClusterState:
        """Nodes (``sinfo``) and jobs (``squeue``), under the planner's names.

        Raises
        ------
        SlurmUnavailable
            When slurmctld does not answer after the retries.
        SlurmCommandError
            When a command fails otherwise or prints something that is not JSON.
        """
        now = self.clock()
        nodes_doc = self._json(self.sinfo_args())
        jobs_doc = self._json(self.squeue_args())
        nodes = tuple(self._node(n) for n in nodes_doc.get("nodes", []) if self._ours(n))
        raw_jobs = jobs_doc.get("jobs", [])
        jobs = tuple(self._job(j) for j in raw_jobs)
        state = ClusterState(at=now, nodes=_dedupe_nodes(nodes), jobs=jobs)
        self._native_ids = {}
        self._reasons = {}
        for raw, ob in zip(raw_jobs, jobs, strict=True):
            if ob.managed and ob.phase != "finished":
                self._native_ids[ob.job] = ob.native_id
                self._reasons[ob.native_id] = str(raw.get("admin_comment") or "")
        return state

    def apply(self, plan: Plan, slice_index: int) -> ApplyReport:
        """Make Slurm run slice ``slice_index``: preempt and hold first, then start."""
        state = self.observe()
        steps, results = reconcile(state, plan, slice_index)
        done = list(results)
        requeued: set[str] = set()
        for step in steps:
            if step.action in ("start", "resume") and not step.in_place:
                if step.job in requeued:  # moved: requeued a moment ago in this apply
                    self.sleep(REQUEUE_GRACE)
                else:
                    self._after_requeue_grace(state.job(step.job))
            result = self._carry_out(step)
            if step.action == "preempt" and result.ok:
                requeued.add(step.job)
            done.append(result)
        return ApplyReport(slice_index=slice_index, at=state.at, results=tuple(done))

    # -- capabilities -----------------------------------------------------------------

    def submit(self, job: Job) -> ActionResult:
        """Submit ``job`` held, unless a managed job of that name is already queued or running."""
        existing = self.observe().job(job.id)
        if existing is not None and existing.phase != "finished":
            return ActionResult(job=job.id, action="submit", ok=True,
                                native_id=existing.native_id, detail="already in Slurm")
        res = self._run(self.sbatch_args(job))
        if res.returncode != 0:
            return ActionResult(job=job.id, action="submit", ok=False, detail=_why(res))
        native_id = res.stdout.strip().split(";")[0]
        return ActionResult(job=job.id, action="submit", ok=True, changed=True, native_id=native_id)

    def suspend(self, job: str) -> ActionResult:
        """``scontrol suspend``: the job stops in place and keeps its nodes (needs an admin)."""
        return self._job_command(job, "suspend", "running", self.suspend_args)

    def resume(self, job: str) -> ActionResult:
        """``scontrol resume`` of a suspended job."""
        return self._job_command(job, "resume", "suspended", self.resume_args)

    def set_reason(self, job: str, text: str) -> ActionResult:
        """Show ``text`` in the job's AdminComment, unless it shows that already.

        The job's comment is not used: it carries the ``gpuplan job=...`` convention
        that names the job and its contract. Setting AdminComment needs a Slurm
        administrator (as ``gpuplan run`` on others' jobs does anyway).
        """
        native_id = self._native_ids.get(job)
        if native_id is None:
            found = self.observe().job(job)
            if found is None or found.phase == "finished":
                return ActionResult(job=job, action="reason", ok=False, detail="no such job")
            native_id = found.native_id
        if self._reasons.get(native_id) == text:
            return ActionResult(job=job, action="reason", ok=True, native_id=native_id, detail=text)
        res = self._run(self.reason_args(native_id, text))
        if res.returncode != 0:
            return ActionResult(job=job, action="reason", ok=False, native_id=native_id,
                                detail=_why(res))
        self._reasons[native_id] = text
        return ActionResult(job=job, action="reason", ok=True, changed=True, native_id=native_id,
                            detail=text)

    def drain(self, node: str, reason: str) -> ActionResult:
        """``scontrol update NodeName=.. State=DRAIN``: running work stays, no new work."""
        res = self._run(self.drain_args(node, reason))
        return ActionResult(job="", action="drain", ok=res.returncode == 0, changed=res.returncode == 0,
                            nodes=(node,), detail=reason if res.returncode == 0 else _why(res))

    def undrain(self, node: str) -> ActionResult:
        """``scontrol update NodeName=.. State=RESUME``."""
        res = self._run(self.undrain_args(node))
        return ActionResult(job="", action="undrain", ok=res.returncode == 0,
                            changed=res.returncode == 0, nodes=(node,),
                            detail="" if res.returncode == 0 else _why(res))

    # -- internals --------------------------------------------------------------------

    def _job_command(self, job: str, action: Literal["suspend", "resume"], phase: str,
                     build: Callable[[str], list[str]]) -> ActionResult:
        found = self.observe().job(job)
        if found is None or found.phase != phase:
            why = "no such job" if found is None else f"job is {found.phase}, not {phase}"
            return ActionResult(job=job, action=action, ok=False, detail=why)
        res = self._run(build(found.native_id))
        ok = res.returncode == 0
        return ActionResult(job=job, action=action, ok=ok, changed=ok, nodes=found.nodes,
                            native_id=found.native_id, detail="" if ok else _why(res))

    def _after_requeue_grace(self, job: ObservedJob | None) -> None:
        """Wait until a just-requeued job may start again.

        slurmd refuses to launch a job whose credential it revoked in the same second
        (credential times have one-second resolution): the job then fails with "Job
        credential revoked". Slurm itself avoids that by delaying requeued jobs two
        minutes; the planner restarts them at once, so it leaves a short grace instead.
        """
        if job is None or job.requeued_at is None:
            return
        wait = job.requeued_at + REQUEUE_GRACE - self.clock()
        if wait > 0:
            self.sleep(wait)

    def _carry_out(self, step: Step) -> ActionResult:
        if step.in_place:
            cmds = [self.resume_args(step.native_id)]
        elif step.action in ("start", "resume"):
            cmds = self.start_args(step.native_id, step.nodes, rehold=step.rehold)
        elif step.action == "preempt":
            cmds = [self.preempt_args(step.native_id)]
        else:
            cmds = [self.hold_args(step.native_id)]
        for args in cmds:
            res = self._run(args)
            if res.returncode != 0:
                return ActionResult(job=step.job, action=step.action, ok=False, nodes=step.nodes,
                                    native_id=step.native_id,
                                    detail=f"{shlex.join(args)}: {_why(res)}")
        return ActionResult(job=step.job, action=step.action, ok=True, changed=True,
                            nodes=step.nodes, native_id=step.native_id)

    def _run(
        self, args: Sequence[str], retry_if: Callable[[CommandResult], bool] | None = None
    ) -> CommandResult:
        """Run one command, retrying with backoff while slurmctld is unreachable."""
        should_retry = retry_if or _unreachable
        delay = self.backoff
        for attempt in range(self.retries + 1):
            res = self.runner(args)
            if not should_retry(res):
                return res
            if attempt < self.retries:
                self.sleep(delay)
                delay = min(delay * 2, self.max_backoff)
        raise SlurmUnavailable(
            f"{shlex.join(args)}: slurmctld unreachable after {self.retries + 1} attempts: {_why(res)}"
        )

    def _json(self, args: Sequence[str]) -> dict[str, Any]:
        # squeue/sinfo --json exit 0 even when slurmctld is down, with an "errors" list.
        res = self._run(args, retry_if=lambda r: _unreachable(r) or bool(_json_errors(r)))
        if res.returncode != 0:
            raise SlurmCommandError(f"{shlex.join(args)}: {_why(res)}")
        try:
            doc = json.loads(res.stdout)
        except json.JSONDecodeError as exc:
            raise SlurmCommandError(
                f"{shlex.join(args)}: output is not JSON ({exc.msg}); Slurm 21.08 or later "
                "with the serializer/json plugin is needed"
            ) from None
        if not isinstance(doc, dict):
            raise SlurmCommandError(f"{shlex.join(args)}: expected a JSON object")
        return doc

    def _ours(self, node: Mapping[str, Any]) -> bool:
        parts = node.get("partitions") or []
        return not parts or self.partition in parts

    def _node(self, raw: Mapping[str, Any]) -> ObservedNode:
        native = str(raw.get("name", ""))
        flags = _tokens(raw.get("state")) | _tokens(raw.get("state_flags"))
        gpu_type, gpus = parse_gres(str(raw.get("gres", "")))
        return ObservedNode(
            name=self.from_native.get(native, native), native=native, gpus=gpus,
            gpu_type=self._gpu_type(gpu_type),
            state="+".join(sorted(flags)).lower() or "unknown",
            drained=bool(flags & _NODE_UNAVAILABLE), reason=str(raw.get("reason") or ""),
        )

    def _job(self, raw: Mapping[str, Any]) -> ObservedJob:
        job_id = _number(raw.get("job_id"))
        native_id = str(int(job_id)) if job_id is not None else str(raw.get("job_id"))
        comment = str(raw.get("comment") or "")
        tagged = parse_comment(comment)
        tags = tagged or {}
        name = tags.get("job") or str(raw.get("name", native_id))
        managed = raw.get("partition") == self.partition or tagged is not None
        spec = self._specs.get(name)
        phase = _phase(raw)
        node_count = _number(raw.get("node_count")) or 1
        nodes = tuple(self.from_native.get(n, n) for n in expand_hostlist(str(raw.get("nodes") or "")))
        pinned = tuple(
            self.from_native.get(n, n) for n in expand_hostlist(str(raw.get("required_nodes") or ""))
        )
        min_runtime = _float(tags.get("min_runtime"))
        if min_runtime is None and spec is not None:
            min_runtime = spec.min_runtime
        resumable = _bool(tags.get("resumable"))
        if resumable is None:
            resumable = spec.resumable if spec is not None else False
        start = _number(raw.get("start_time"))
        restarts = int(_number(raw.get("restart_cnt")) or 0)
        # Slurm resets a requeued job's submit time to the moment of the requeue.
        submitted = _number(raw.get("submit_time"))
        return ObservedJob(
            job=name, native_id=native_id, phase=phase, managed=managed,
            project=tags.get("project") or (spec.project if spec else None),
            gpus=job_gpus(raw, int(node_count)),
            nodes=nodes if phase in ("running", "suspended") else (), pinned=pinned,
            run_start=float(start) if phase in ("running", "suspended") and start else None,
            min_runtime=min_runtime, resumable=resumable,
            restarts=restarts, requeued_at=submitted if restarts else None,
            reason=str(raw.get("state_reason") or ""),
        )

    def _gpu_type(self, gres_type: str | None) -> str | None:
        if gres_type is None:
            return None
        known = self.scenario.gpu_types if self.scenario else {}
        for name in known:
            if name.lower() == gres_type.lower():
                return name
        return gres_type.upper()

    def _gpus_per_node(self, job: Job) -> int:
        sizes = [
            n.gpus for n in (self.scenario.nodes if self.scenario else ())
            if job.allows(n.cluster, n.gpu_type)
        ]
        return max(sizes) if sizes else 8


def contract_comment(job: Job) -> str:
    """The comment that names a job and carries its contract (read by :func:`parse_comment`)."""
    return (
        f"{COMMENT_TAG} job={job.id} project={job.project} min_runtime={job.min_runtime:g} "
        f"resumable={int(job.resumable)}"
    )


def parse_comment(comment: str) -> dict[str, str] | None:
    """``key=value`` pairs of a ``gpuplan ...`` comment; ``None`` when it is not tagged."""
    words = comment.split()
    if not words or words[0].rstrip(":") != COMMENT_TAG:
        return None
    out: dict[str, str] = {}
    for word in words[1:]:
        key, sep, value = word.partition("=")
        if sep:
            out[key] = value
    return out


def parse_gres(gres: str) -> tuple[str | None, int]:
    """``gpu:h100:8(S:0-1)`` -> ``("h100", 8)``; several entries add up; no GPU -> 0."""
    total = 0
    gpu_type: str | None = None
    for item in gres.split(","):
        item = item.split("(")[0].strip()
        parts = item.replace("gres/", "").replace("gres:", "").split(":")
        if not parts or parts[0] != "gpu":
            continue
        count = parts[-1]
        if len(parts) >= 3:
            gpu_type = parts[1]
        total += int(count) if count.isdigit() else (1 if len(parts) == 1 else 0)
    return gpu_type, total


def job_gpus(raw: Mapping[str, Any], node_count: int) -> int:
    """GPUs a job asks for, from its per-node or per-job GPU request."""
    per_node = parse_gres(str(raw.get("tres_per_node") or ""))[1]
    if per_node:
        return per_node * node_count
    return parse_gres(str(raw.get("tres_per_job") or ""))[1]


def _phase(raw: Mapping[str, Any]) -> JobPhase:
    states = _tokens(raw.get("job_state"))
    reason = str(raw.get("state_reason") or "")
    if states & _FINISHED:
        return "finished"
    if states & {"COMPLETING", "REQUEUED", "STOPPED", "SIGNALING"}:
        return "completing"
    if "SUSPENDED" in states:
        return "suspended"
    if states & {"RUNNING", "CONFIGURING"}:
        return "running"
    if "REQUEUE_HOLD" in states or reason.startswith("JobHeld") or _number(raw.get("priority")) == 0:
        return "held"
    return "pending"


def _tokens(value: object) -> set[str]:
    if isinstance(value, str):
        return {t for t in value.upper().replace("+", " ").split() if t}
    if isinstance(value, list | tuple):
        return {str(v).upper() for v in value}
    return set()


def _number(value: object) -> float | None:
    """A number in any of the OpenAPI shapes: ``5`` or ``{"set": true, "number": 5}``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite", False):
            return None
        return _number(value.get("number"))
    return None


def _float(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _bool(text: str | None) -> bool | None:
    if text is None:
        return None
    return text.lower() in ("1", "true", "yes")


def _unreachable(res: CommandResult) -> bool:
    if res.returncode == 0:
        return False
    text = (res.stderr + res.stdout).lower()
    return res.returncode == 124 or any(marker in text for marker in _UNREACHABLE)


def _json_errors(res: CommandResult) -> list[str]:
    """The ``errors`` a successful-looking ``--json`` answer carries (none if unparsable)."""
    if res.returncode != 0:
        return []
    try:
        doc = json.loads(res.stdout)
    except json.JSONDecodeError:
        return []
    errors = doc.get("errors") if isinstance(doc, dict) else None
    if not isinstance(errors, list):
        return []
    return [
        " ".join(str(e.get(k)) for k in ("source", "description", "error") if e.get(k))
        if isinstance(e, dict) else str(e)
        for e in errors
    ]


def _why(res: CommandResult) -> str:
    errors = _json_errors(res)
    if errors:
        return "; ".join(errors)
    text = res.stderr.strip() or res.stdout.strip() or f"exit code {res.returncode}"
    return text.splitlines()[-1]


def _dedupe_nodes(nodes: tuple[ObservedNode, ...]) -> tuple[ObservedNode, ...]:
    # sinfo lists a node once per partition it belongs to.
    seen: dict[str, ObservedNode] = {}
    for n in nodes:
        seen.setdefault(n.name, n)
    return tuple(seen.values())


def create(scenario: Scenario, options: Mapping[str, str]) -> SlurmExecutor:
    """Registry factory. Options: ``partition``, ``command`` (a command line, split with
    :func:`shlex.split`), ``node_map`` (``planner=slurm,...``), ``retries``, ``backoff``."""
    known = {"partition", "command", "node_map", "retries", "backoff"}
    unknown = set(options) - known
    if unknown:
        raise ValueError(
            f"slurm executor: unknown option(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(known))})"
        )
    conf = os.environ.get("SLURM_CONF")
    if conf and not os.path.exists(conf):
        # sinfo would retry reading it for a minute per call; say so at once instead.
        raise ValueError(f"slurm executor: SLURM_CONF={conf} does not exist")
    node_map: dict[str, str] = {}
    for pair in filter(None, options.get("node_map", "").split(",")):
        planner_name, sep, native = pair.partition("=")
        if not sep:
            raise ValueError(f"slurm executor: node_map entry {pair!r} is not planner=slurm")
        node_map[planner_name] = native
    return SlurmExecutor(
        scenario,
        partition=options.get("partition", "gpuplan"),
        node_map=node_map,
        command=tuple(shlex.split(options["command"])) if "command" in options else ("sleep", "{duration}"),
        retries=int(options.get("retries", "5")),
        backoff=float(options.get("backoff", "0.5")),
    )

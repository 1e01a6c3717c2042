"""Byte-level fuzz: mangled scenario, CSV, trace and sweep files load or fail cleanly,
each in bounded time and memory.

Next to the structural fuzz (``test_load_fuzz.py``), this one damages the bytes: random
bytes, truncations, re-encodings, bit flips, and spliced or repeated chunks of valid
files. Cases are drawn from one seeded ``random.Random``, so a failure repeats. Each
case runs in its own forked process under an address-space limit and a deadline
(``_byte_fuzz_runner.py``): a hang or a memory blow-up fails the test, it cannot hang CI.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).with_name("_byte_fuzz_runner.py")
SEED = 15
CASES_PER_KIND = 150

TINY_TEXT = (REPO / "scenarios" / "tiny.yaml").read_text()
CSV_TEXT = (
    "id,project,user,submit,duration,gpus,gpu_types,min_runtime,resumable\n"
    "j1,research/nlp,ana,0s,3h,16,H100,1h,true\n"
    "j2,research/vision,bo,10m,2h,8,,30m,false\n"
    '"j3",ops,cy,1h,45m,4,H100|B200,0,true\n'
)
TRACE_TEXT = (
    "timestamp,duration,num_gpus,gpu_time,cluster\n"
    "2017-10-02 00:00:00,600,1,600,aaa111\n"
    "2017-10-02 01:30:00,7200,8,57600,bbb222\n"
    "2017-10-03 12:00:00,3600,4,14400,aaa111\n"
)
SWEEP_TEXT = (
    "base: tiny\ndays: 1\npolicies: [fairshare, mip]\n"
    "grid:\n  policy.lookback: [3d, 7d]\n  org.research.share: [2, 3]\n"
    "options: {time_limit: 2, holds: true}\nout: results\n"
)


def _scenario_with(source: dict[str, object]) -> str:
    data = yaml.safe_load(TINY_TEXT)
    data["workloads"] = source
    return yaml.safe_dump(data)


# -- mutations: each takes the valid bytes and a Random, and returns damaged bytes --------


def random_bytes(data: bytes, rng: random.Random) -> bytes:
    return rng.randbytes(rng.choice([0, 1, 7, 64, 512, 4096]))


def truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(len(data) + 1)]


def reencode(data: bytes, rng: random.Random) -> bytes:
    text = data.decode("utf-8", errors="replace")  # an earlier mutation may have broken it
    if rng.random() < 0.5:  # put a non-ASCII character where a latin-1 file would differ
        at = rng.randrange(len(text) + 1)
        text = text[:at] + rng.choice("éßøñü€") + text[at:]
    encoding = rng.choice(["utf-16", "utf-16-le", "utf-32", "latin-1", "cp1252", "utf-8-sig"])
    return text.encode(encoding, errors="replace")


def flip_bits(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if out:
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def splice(data: bytes, rng: random.Random) -> bytes:
    """Repeat, move or delete a chunk: duplicate keys, broken nesting, split rows."""
    a, b = sorted(rng.randrange(len(data) + 1) for _ in range(2))
    chunk = data[a:b]
    action = rng.choice(["repeat", "delete", "move"])
    if action == "repeat":
        return data[:b] + chunk * rng.randint(1, 20) + data[b:]
    if action == "delete":
        return data[:a] + data[b:]
    rest = data[:a] + data[b:]
    at = rng.randrange(len(rest) + 1)
    return rest[:at] + chunk + rest[at:]


def special(data: bytes, rng: random.Random) -> bytes:
    """Insert a byte sequence that readers are known to trip on."""
    token = rng.choice([b"\x00", b"\xef\xbb\xbf", b"\xff\xfe", b'"', b"\r", b"\n\n\n", b"&a ", b"*a",
                        b".inf", b".nan", b"1e308", b"-", b"9" * 5000, b"[" * 300, b"{", b"\t"])
    at = rng.randrange(len(data) + 1)
    return data[:at] + token + data[at:]


MUTATIONS: tuple[Callable[[bytes, random.Random], bytes], ...] = (
    random_bytes, truncate, reencode, flip_bits, splice, special,
)


def _cases(tmp_path: Path) -> list[tuple[str, str]]:
    """Write every case's files; returns (kind, file to load) pairs."""
    rng = random.Random(SEED)
    kinds: dict[str, tuple[str, bytes, str | None]] = {
        # kind: (file name of the damaged file, its valid bytes, the scenario naming it)
        "scenario": ("scenario.yaml", TINY_TEXT.encode(), None),
        "csv": ("jobs.csv", CSV_TEXT.encode(), _scenario_with({"csv": "jobs.csv"})),
        "trace": ("trace.csv", TRACE_TEXT.encode(),
                  _scenario_with({"philly": {"path": "trace.csv", "gpu_type": "H100"}})),
        "sweep": ("sweep.yaml", SWEEP_TEXT.encode(), None),
    }
    cases: list[tuple[str, str]] = []
    for kind, (name, valid, scenario) in kinds.items():
        for i in range(CASES_PER_KIND):
            folder = tmp_path / f"{kind}-{i:03d}"
            folder.mkdir()
            damaged = valid
            for _ in range(rng.randint(1, 2)):
                damaged = rng.choice(MUTATIONS)(damaged, rng)
            (folder / name).write_bytes(damaged)
            if scenario is None:
                cases.append(("sweep" if kind == "sweep" else "scenario", str(folder / name)))
            else:
                (folder / "scenario.yaml").write_text(scenario)
                cases.append(("scenario", str(folder / "scenario.yaml")))
    return cases


def test_mutations_are_deterministic(tmp_path: Path) -> None:
    """The same seed writes the same cases, so a failure can be replayed."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = _cases(tmp_path / "a")
    second = _cases(tmp_path / "b")
    assert len(first) == len(second) == 4 * CASES_PER_KIND
    for (_, one), (_, two) in zip(first, second, strict=True):
        for f in Path(one).parent.iterdir():
            assert f.read_bytes() == (Path(two).parent / f.name).read_bytes()


def test_damaged_files_load_or_fail_cleanly_in_bounded_time_and_memory(tmp_path: Path) -> None:
    """Every case loads or raises ScenarioError naming its file; none hangs, none blows up."""
    cases = _cases(tmp_path)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, str(RUNNER)], input=json.dumps(cases), capture_output=True, text=True,
        timeout=240, env=env, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    outcomes = dict(json.loads(line) for line in proc.stdout.splitlines())
    assert len(outcomes) == len(cases)
    failures = {path: out for path, out in outcomes.items() if out not in ("ok", "error")}
    assert not failures, json.dumps(failures, indent=1)[:4000]
    # The fuzz must exercise both sides: some damaged files still load, most do not.
    counts = {o: list(outcomes.values()).count(o) for o in ("ok", "error")}
    assert counts["error"] > len(cases) // 2 and counts["ok"] > 0, counts


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.__name__)
def test_each_mutation_changes_a_file(mutation: Callable[[bytes, random.Random], bytes]) -> None:
    """No mutation is a silent no-op on a valid file (over a few draws)."""
    rng = random.Random(SEED)
    valid = TINY_TEXT.encode()
    assert any(mutation(valid, rng) != valid for _ in range(5))


@pytest.mark.parametrize(
    ("env", "outcome"),
    [({"FUZZ_CASE_TIMEOUT": "0.01"}, "timeout"), ({"FUZZ_CASE_HEADROOM": "1000000"}, "crash: MemoryError")],
)
def test_the_runner_reports_a_hang_or_a_blow_up_as_a_failure(env: dict[str, str], outcome: str) -> None:
    """The guards work: a case past its deadline or its memory is a failure, not a hang."""
    cases = [["scenario", str(REPO / "scenarios" / "ai2-like.yaml")]]
    proc = subprocess.run(
        [sys.executable, str(RUNNER)], input=json.dumps(cases), capture_output=True, text=True,
        timeout=120, env={**os.environ, "OPENBLAS_NUM_THREADS": "1", **env}, check=True,
    )
    assert json.loads(proc.stdout)[1].startswith(outcome)

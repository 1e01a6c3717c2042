"""Runs byte-fuzz cases for ``test_byte_fuzz.py``: each in a forked child, bounded.

Reads ``[[kind, path], ...]`` as JSON on stdin and prints one JSON line per case:
``[path, outcome]``, the outcome being ``ok``, ``error`` (a clean ScenarioError), or a
failure: ``timeout``, ``crash: ...`` (any other exception, MemoryError included when the
address-space limit is hit) or ``bad-message: ...``. The parent imports gpuplan once;
each child is forked from it, so a case costs milliseconds, and a child that hangs is
killed at its deadline instead of hanging the test.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scenarios import ScenarioError, load_scenario  # noqa: E402
from scenarios.sweep_file import load_sweep_file  # noqa: E402

TIMEOUT_S = float(os.environ.get("FUZZ_CASE_TIMEOUT", "20"))
HEADROOM_BYTES = int(os.environ.get("FUZZ_CASE_HEADROOM", str(768 * 1024 * 1024)))


def run_case(kind: str, path: str) -> str:
    try:
        if kind == "sweep":
            load_sweep_file(path)
        else:
            load_scenario(path)
    except ScenarioError as exc:
        message = str(exc)
        one_line = "\n" not in message.strip() and len(message) < 2000
        if not message.startswith(tuple({path, str(Path(path).parent)})) or not one_line:
            return f"bad-message: {message[:300]}"
        return "error"
    return "ok"


def _address_space() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def child(kind: str, path: str, out: int) -> None:
    limit = _address_space() + HEADROOM_BYTES
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        result = run_case(kind, path)
    except BaseException as exc:  # noqa: BLE001 - any other exception is the finding
        result = f"crash: {type(exc).__name__}: {str(exc)[:300]}"
    os.write(out, result.encode("utf-8", "replace")[:4000])
    os._exit(0)


def main() -> None:
    cases = json.loads(sys.stdin.read())
    for kind, path in cases:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            child(kind, path, write)
        os.close(write)
        deadline = time.monotonic() + TIMEOUT_S
        outcome = None
        while True:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                outcome = "timeout"
                break
            time.sleep(0.002)
        data = os.read(read, 4096).decode("utf-8", "replace")
        os.close(read)
        print(json.dumps([path, outcome or data or "crash: the child died without a word"]), flush=True)


if __name__ == "__main__":
    main()

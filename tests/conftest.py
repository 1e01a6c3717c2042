"""Suite-wide fixtures: tests never reach the network (loopback and Unix sockets only)."""

from __future__ import annotations

import importlib.util
import ipaddress
import os
import socket
import sys
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

# The what-if app keeps finished runs on disk by default; the suite's runs (and the app
# processes it starts) must neither read a developer's cache nor leave one behind. Tests
# of that cache give it a folder of their own.
os.environ["GPUPLAN_APP_CACHE"] = "off"

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_local(address: Any) -> bool:
    if not isinstance(address, tuple):  # Unix socket path
        return True
    host = str(address[0])
    if host in ("localhost", ""):
        return True
    try:
        ip = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False  # a host name other than localhost would need DNS: not allowed
    return ip.is_loopback or ip.is_unspecified


def _guarded_connect(self: socket.socket, address: Any) -> None:
    if not _is_local(address):
        raise RuntimeError(f"tests must not reach the network (tried {address!r})")
    _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    if not _is_local(address):
        raise RuntimeError(f"tests must not reach the network (tried {address!r})")
    return _real_connect_ex(self, address)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded_connect_ex)
    yield


@cache
def _benchmark(name: str) -> ModuleType:
    path = Path(__file__).resolve().parent.parent / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def benchmark_script() -> Callable[[str], ModuleType]:
    """A script of ``benchmarks/`` by name (``"outcomes"``), imported once per session."""
    return _benchmark

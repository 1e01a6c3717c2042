"""The executor registry: built-ins plus plugins from the ``gpuplan.executors`` group.

The registry is an explicit object, filled by :func:`default_registry` (built-ins, then
entry points); nothing registers itself as a side effect of being imported. Plugins are
loaded lazily, on first use, so a broken plugin only fails the run that asks for it.

A plugin's entry point names a factory, a callable ``factory(scenario, options)``
returning an :class:`~planner.executors.protocol.Executor` (a class whose constructor
takes those two arguments is fine)::

    [project.entry-points."gpuplan.executors"]
    mycluster = "mypkg.executor:create"
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from models import Scenario
from planner.executors.protocol import Executor, describe_error

ENTRY_POINT_GROUP = "gpuplan.executors"

BUILTINS: dict[str, str] = {
    "dryrun": "planner.executors.dryrun:create",
    "slurm": "planner.executors.slurm:create",
}


class ExecutorFactory(Protocol):
    """Builds an executor for a scenario from string options (``--executor-option``)."""

    def __call__(self, scenario: Scenario, options: Mapping[str, str]) -> Executor: ...


class ExecutorError(LookupError):
    """An executor name that is not registered, or a plugin that fails to load or to
    build its executor (the message names it)."""


class ExecutorOptionError(ExecutorError, ValueError):
    """A factory refused its options (it raised ``KeyError``, ``ValueError`` or
    ``TypeError``): bad input, naming the executor."""


class _Loader(Protocol):
    def load(self) -> object: ...


class _Target:
    """A ``module:attribute`` reference, loaded on demand (the built-ins' form)."""

    def __init__(self, value: str) -> None:
        self.value = value

    def load(self) -> object:
        module, _, attr = self.value.partition(":")
        obj: object = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj


class ExecutorRegistry:
    """Executor names mapped to factories; each name once."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[_Loader | None, ExecutorFactory | None, str]] = {}
        self.problems: list[str] = []
        """Entry points that were skipped (duplicate names), with the reason."""

    def register(self, name: str, factory: ExecutorFactory, *, origin: str = "code") -> None:
        """Register ``factory`` under ``name``.

        Raises
        ------
        ValueError
            When ``name`` is taken.
        """
        self._add(name, None, factory, origin)

    def register_lazy(self, name: str, target: str | _Loader, *, origin: str = "code") -> None:
        """Register a factory by reference (``"pkg.module:attr"`` or an entry point)."""
        loader = _Target(target) if isinstance(target, str) else target
        self._add(name, loader, None, origin)

    def load_entry_points(
        self,
        group: str = ENTRY_POINT_GROUP,
        entry_points: Callable[..., Iterable[importlib.metadata.EntryPoint]] | None = None,
    ) -> None:
        """Register every entry point of ``group`` (not loaded until used).

        A plugin whose name is taken is skipped and noted in :attr:`problems`: the
        built-ins cannot be shadowed by an installed package by accident.
        """
        find = entry_points or importlib.metadata.entry_points
        for ep in find(group=group):
            dist = getattr(ep, "dist", None)
            origin = f"entry point {ep.name} = {ep.value}" + (
                f" (from {dist.name})" if dist is not None else ""
            )
            if ep.name in self._entries:
                self.problems.append(
                    f"executor {ep.name!r}: {origin} skipped, the name is taken by "
                    f"{self._entries[ep.name][2]}"
                )
                continue
            self.register_lazy(ep.name, ep, origin=origin)

    def names(self) -> tuple[str, ...]:
        """Registered executor names, sorted."""
        return tuple(sorted(self._entries))

    def origin(self, name: str) -> str:
        """Where ``name`` comes from (``built-in``, or the entry point and distribution)."""
        return self._lookup(name)[2]

    def factory(self, name: str) -> ExecutorFactory:
        """The factory registered under ``name``, loading its plugin if needed.

        Raises
        ------
        ExecutorError
            For an unknown name or a plugin that cannot be imported.
        """
        loader, factory, origin = self._lookup(name)
        if factory is None:
            assert loader is not None
            try:
                loaded = loader.load()
            except Exception as exc:  # a plugin's import failure, of any kind
                raise ExecutorError(
                    f"executor {name!r} ({origin}) failed to load: {type(exc).__name__}: {exc}"
                ) from exc
            if not callable(loaded):
                raise ExecutorError(f"executor {name!r} ({origin}) is not callable")
            factory = loaded
            self._entries[name] = (loader, factory, origin)
        assert factory is not None
        return factory

    def create(self, name: str, scenario: Scenario, options: Mapping[str, str] | None = None) -> Executor:
        """Build executor ``name`` for ``scenario``; checks it has ``observe`` and ``apply``.

        Raises
        ------
        ExecutorError
            When ``name`` is unknown, its plugin cannot be loaded, or its factory fails
            (:class:`ExecutorOptionError` for a ``KeyError``, ``ValueError`` or
            ``TypeError``: options it refuses); the message names the executor.
        """
        given = dict(options or {})
        factory = self.factory(name)
        try:
            executor = factory(scenario, given)
        except KeyError as exc:
            key = exc.args[0] if exc.args else None
            if isinstance(key, str) and key not in given:  # ``options["url"]`` without -o url=
                raise ExecutorOptionError(
                    f"executor {name!r}: missing option {key!r} (give -o {key}=VALUE)"
                ) from exc
            raise ExecutorOptionError(f"executor {name!r}: bad options: {describe_error(exc)}") from exc
        except ValueError as exc:
            raise ExecutorOptionError(f"executor {name!r}: {describe_error(exc, typed=False)}") from exc
        except TypeError as exc:
            raise ExecutorOptionError(f"executor {name!r}: bad options: {describe_error(exc)}") from exc
        except Exception as exc:  # a plugin's failure of any other kind, named
            raise ExecutorError(
                f"executor {name!r} ({self.origin(name)}) failed to start: {describe_error(exc)}"
            ) from exc
        if not isinstance(executor, Executor):
            raise ExecutorError(
                f"executor {name!r} ({self.origin(name)}) built a {type(executor).__name__}, "
                "which lacks name/observe()/apply()"
            )
        return executor

    def _lookup(self, name: str) -> tuple[_Loader | None, ExecutorFactory | None, str]:
        try:
            return self._entries[name]
        except KeyError:
            raise ExecutorError(
                f"unknown executor {name!r} (known: {', '.join(self.names()) or 'none'})"
            ) from None

    def _add(self, name: str, loader: _Loader | None, factory: ExecutorFactory | None,
             origin: str) -> None:
        if name in self._entries:
            raise ValueError(f"executor {name!r} is already registered ({self._entries[name][2]})")
        self._entries[name] = (loader, factory, origin)


def default_registry(
    entry_points: Callable[..., Iterable[importlib.metadata.EntryPoint]] | None = None,
) -> ExecutorRegistry:
    """A registry with the built-ins (``dryrun``, ``slurm``) and the installed plugins."""
    registry = ExecutorRegistry()
    for name, target in BUILTINS.items():
        registry.register_lazy(name, target, origin="built-in")
    registry.load_entry_points(entry_points=entry_points)
    return registry

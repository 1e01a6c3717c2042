"""The ``gpuplan`` command line.

Each sub-command lives in its own module of this package with a ``register(subparsers)``
function; :data:`COMMAND_MODULES` lists them in the order ``--help`` shows them.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import traceback
from collections.abc import Sequence

from models.errors import GpuplanError
from planner.cli.options import join_negative_values

COMMAND_MODULES = (
    "validate",
    "scenario",
    "plan",
    "explain",
    "simulate",
    "sweep",
    "run",
    "status",
    "app",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuplan",
        description="Plan scarce GPU time between projects by budgets, hierarchical fair "
        "share and time slicing.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"planner.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"planner.cli.{name}":
                continue  # not built yet
            raise
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gpuplan`` console script; returns the exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    # --debug is accepted anywhere on the line, not only before the sub-command.
    debug = "--debug" in args_list
    args_list = [a for a in args_list if a != "--debug"]
    parser = build_parser()
    args = parser.parse_args(join_negative_values(parser, args_list))
    args.debug = debug
    try:
        code: int = args.func(args)
        sys.stdout.flush()  # here, where a reader that went away is handled below
        return code
    except GpuplanError as exc:  # the project's own errors: bad input, unusable files
        if args.debug:
            traceback.print_exc()
        print(f"gpuplan: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gpuplan: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of stdout went away (`gpuplan simulate ... | head`): what was asked
        # for is done; stop quietly, as other command-line tools do. Python would
        # otherwise report the pipe again when it flushes stdout at exit.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

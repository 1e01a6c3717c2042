"""``gpuplan validate FILE``."""

from __future__ import annotations

import argparse

from scenarios import load_scenario


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "validate",
        help="check a scenario file",
        description="Load and check a scenario file. Prints a one-line summary, or one "
        "error naming the file and field (exit code 2).",
    )
    p.add_argument("file", help="scenario YAML file (or a bundled scenario name, e.g. tiny)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    s = load_scenario(args.file)
    gpus = sum(n.gpus for n in s.nodes)
    print(
        f"{args.file}: ok: scenario {s.name!r}, {len(s.clusters)} clusters, {len(s.pools)} pools, "
        f"{gpus} GPUs, {len(s.projects)} projects, {len(s.jobs)} jobs"
    )
    return 0

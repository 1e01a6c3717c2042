"""Grid edits: dotted keys written into a raw scenario mapping, and the point's scenario.

See ``docs/sweeps.md`` (*Grid keys*) for what each key edits.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from models import OrgUnit, Scenario, with_shares
from scenarios.errors import ScenarioError, field_path, from_validation_error
from scenarios.load import scenario_from_dict
from scenarios.sweep.errors import SEED_KEY, SweepError

if TYPE_CHECKING:
    from scenarios.sweep.grid import SweepBase, SweepPoint

_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _segments(key: str) -> list[str | int]:
    """``clusters.alpha.node_groups[0].nodes`` -> ``['clusters', 'alpha', 'node_groups', 0, 'nodes']``."""
    out: list[str | int] = []
    pos = 0
    for match in _TOKEN.finditer(key):
        between = key[pos : match.start()]
        if between not in ("", "."):
            raise SweepError(None, f"grid key {key!r}: cannot read it as a dotted path")
        out.append(match.group(1) if match.group(1) is not None else int(match.group(2)))
        pos = match.end()
    if not out or pos != len(key):
        raise SweepError(None, f"grid key {key!r}: cannot read it as a dotted path")
    return out


def _unit_paths(units: Any, prefix: str = "") -> Iterator[str]:
    for unit in units if isinstance(units, list) else []:
        if isinstance(unit, dict) and "name" in unit:
            path = f"{prefix}{unit['name']}"
            yield path
            yield from _unit_paths(unit.get("children", []), path + "/")


def _org_unit(data: dict[str, Any], key: str) -> str:
    """The unit path (``research/nlp``) that an ``org.<unit>.share`` key names."""
    written = key[len("org.") : -len(".share")]
    paths = list(_unit_paths(data.get("org", [])))
    found = [p for p in paths if written in (p, p.replace("/", "."))]
    if not found:
        raise SweepError(
            None, f"grid key {key!r}: no org unit {written!r} (units: {', '.join(paths)})"
        )
    if len(found) > 1:
        raise SweepError(
            None, f"grid key {key!r}: ambiguous, matches {', '.join(found)}; write it with '/'"
        )
    return found[0]


def _locate(data: dict[str, Any], key: str) -> tuple[Any, str | int]:
    """The container and slot that ``key`` writes to; missing mappings are created.

    Creating mappings is safe: the scenario models forbid unknown fields, so a misspelt
    key still fails when the point's scenario is validated.
    """
    segments = _segments(key)
    if key.startswith("workloads.generate.") and not (
        isinstance(data.get("workloads"), dict) and data["workloads"].get("generate") is not None
    ):
        raise SweepError(
            None,
            f"grid key {key!r}: the base scenario's workload is not generated "
            "(pass the scenario file, not a loaded Scenario, to keep workloads.generate)",
        )
    node: Any = data
    where = ""
    for i, seg in enumerate(segments[:-1]):
        nxt = segments[i + 1]
        if isinstance(node, list):
            node = _list_item(node, seg, key, where)
        elif isinstance(node, dict):
            if not isinstance(seg, str):
                raise SweepError(None, f"grid key {key!r}: {where or 'the scenario'} is not a list")
            if node.get(seg) is None:
                node[seg] = [] if isinstance(nxt, int) else {}
            node = node[seg]
        else:
            raise SweepError(None, f"grid key {key!r}: {where} has no field {seg!r}")
        where += f"[{seg}]" if isinstance(seg, int) else (f".{seg}" if where else seg)
    last = segments[-1]
    if isinstance(node, list):
        if not isinstance(last, int) or not 0 <= last < len(node):
            item = f"[{last}]" if isinstance(last, int) else f"named {last!r}"
            raise SweepError(None, f"grid key {key!r}: {where} has no item {item}")
    elif not isinstance(node, dict) or not isinstance(last, str):
        raise SweepError(None, f"grid key {key!r}: {where} has no field {last!r}")
    return node, last


def _list_item(items: list[Any], seg: str | int, key: str, where: str) -> Any:
    if isinstance(seg, int):
        if not 0 <= seg < len(items):
            raise SweepError(None, f"grid key {key!r}: {where} has no item [{seg}]")
        return items[seg]
    names = [str(it.get("name")) for it in items if isinstance(it, dict) and "name" in it]
    for item in items:
        if isinstance(item, dict) and item.get("name") == seg:
            return item
    raise SweepError(
        None, f"grid key {key!r}: {where} has no item named {seg!r} (names: {', '.join(names)})"
    )


def _scale_cluster(data: dict[str, Any], key: str) -> dict[str, Any]:
    name = key[len("clusters.") : -len(".scale")]
    cluster = _list_item(data.get("clusters") or [], name, key, "clusters")
    if not isinstance(cluster, dict):
        raise SweepError(None, f"grid key {key!r}: cluster {name!r} is not a mapping")
    return cluster


def check_key(base: SweepBase, key: str, value: Any) -> None:
    """Raise :class:`SweepError` if ``key`` names nothing in the base scenario.

    ``value`` (one of the key's values) is written into a copy of the base to catch a
    misspelt field name, which the models reject as unknown. Errors about the value
    itself are left to the point, which reports them as its own failure.
    """
    data = copy.deepcopy(base.data)
    if key.startswith("org.") and key.endswith(".share"):
        _org_unit(data, key)
    elif key.startswith("clusters.") and key.endswith(".scale") and key.count(".") == 2:
        _scale_cluster(data, key)
    else:
        _locate(data, key)
    try:
        apply_edit(data, key, value)
        Scenario.model_validate(data)  # cheap: a generated workload is not generated here
    except ScenarioError:
        return
    except ValidationError as err:
        for error in err.errors(include_url=False):
            if error["type"] == "extra_forbidden":
                where = field_path(tuple(error["loc"]))
                raise SweepError(None, f"grid key {key!r}: {where} is not a scenario field") from None
    except Exception:  # noqa: BLE001 - about the value (an overflow...): the point's own error
        return


def apply_edit(data: dict[str, Any], key: str, value: Any) -> None:
    """Write one grid value into a raw scenario mapping, in place.

    Raises :class:`SweepError` when the key names nothing and :class:`ScenarioError`
    when the value is not allowed (e.g. a share that is not positive).
    """
    if key.startswith("org.") and key.endswith(".share"):
        path = _org_unit(data, key)
        try:
            units = tuple(OrgUnit.model_validate(u) for u in data["org"])
            data["org"] = [u.model_dump(mode="json") for u in with_shares(units, {path: value})]
        except ValidationError as err:
            raise from_validation_error(err, None, prefix=key.rsplit(".", 1)[0]) from None
    elif key.startswith("clusters.") and key.endswith(".scale") and key.count(".") == 2:
        cluster = _scale_cluster(data, key)
        # `not 0 < value < inf` also refuses NaN, and compares a huge int without overflow.
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
            raise ScenarioError(None, f"{key}: expected a positive, finite scale factor, got {value!r}")
        for i, group in enumerate(cluster.get("node_groups") or []):
            nodes = group.get("nodes") if isinstance(group, dict) else None
            if isinstance(nodes, bool) or not isinstance(nodes, int | float):
                # Another edit of this point wrote something else there.
                raise ScenarioError(None, f"{key}: node_groups[{i}].nodes is not a number: {nodes!r}")
            try:
                scaled = math.floor(nodes * value + 0.5)
            except OverflowError:  # beyond any float: far too many nodes
                raise ScenarioError(
                    None, f"{key}: scale factor {value!r} gives more nodes than can be counted"
                ) from None
            group["nodes"] = max(1, scaled)
    else:
        node, slot = _locate(data, key)
        node[slot] = value


def point_scenario(base: SweepBase, point: SweepPoint) -> Scenario:
    """The validated scenario of ``point``: the base with the point's edits applied.

    Relative paths in the base (a CSV workload, a trace) still resolve against the base
    file's folder. Raises :class:`ScenarioError` naming the field for an invalid point.
    """
    edits = list(point.edits())
    if base.scenario is not None and not edits and point.seed is None:
        return base.scenario
    data = copy.deepcopy(base.data)
    for key, value in edits:
        apply_edit(data, key, value)
    if point.seed is not None:
        apply_edit(data, SEED_KEY, point.seed)
    return scenario_from_dict(data, base.file)



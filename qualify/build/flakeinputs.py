"""Flake input provenance: which inputs an arm's toolchain comes from, and how they differ.

The lock file cannot say which input an arm uses (the flake's code decides), so three layers
are tried: the flake's own declaration (top-level output `qualify.<arm>.inputs`), then drv
membership of a probe package of each input in the arm's build closure, then "unknown".
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from qualify.build import nix

PROBES = ("bash", "glibc", "stdenv")


def direct_inputs(locks: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The root's inputs with their locked facts (follows resolved from the root)."""
    nodes = locks.get("nodes", {})
    root = nodes.get(locks.get("root", "root"), {})
    out: dict[str, dict[str, Any]] = {}
    for name, target in (root.get("inputs") or {}).items():
        label = _follow(nodes, locks.get("root", "root"), target)
        node = nodes.get(label, {}) if label else {}
        out[name] = facts(node)
    return out


def _follow(nodes: Mapping[str, Any], root: str, target: Any) -> str | None:
    if isinstance(target, str):
        return target
    if isinstance(target, list):  # a follows path, resolved from the root
        label: str | None = root
        for step in target:
            label = (nodes.get(label or "", {}).get("inputs") or {}).get(step)
            if isinstance(label, list):
                label = _follow(nodes, root, label)
        return label
    return None


def facts(node: Mapping[str, Any]) -> dict[str, Any]:
    locked = node.get("locked") or {}
    original = node.get("original") or {}
    modified = locked.get("lastModified")
    return {
        "original": _describe(original),
        "type": locked.get("type"),
        "rev": locked.get("rev"),
        "narHash": locked.get("narHash"),
        "lastModified": (
            datetime.fromtimestamp(modified, UTC).isoformat(timespec="seconds")
            if isinstance(modified, int)
            else None
        ),
        "revCount": locked.get("revCount"),
    }


def _describe(original: Mapping[str, Any]) -> str:
    kind = original.get("type")
    if kind in ("github", "gitlab", "sourcehut"):
        ref = f"/{original['ref']}" if original.get("ref") else ""
        return f"{kind}:{original.get('owner')}/{original.get('repo')}{ref}"
    if kind == "path":
        return f"path:{original.get('path')}"
    return str(original.get("url") or original.get("path") or kind or "?")


def declared(locked_url: str, arm: str, env: Mapping[str, str]) -> list[str] | None:
    """The inputs the flake itself names for `arm` (output `qualify.<arm>.inputs`), if any."""
    try:
        value = nix.eval_json(f"{locked_url}#qualify.{arm}.inputs", env)
    except nix.NixError:
        return None
    return [str(v) for v in value] if isinstance(value, list) else None


def probe_drvs(locked_url: str, inputs: list[str], system: str, env: Mapping[str, str]) -> dict[str, str]:
    """A probe derivation per input that has packages (glibc/bash rarely overlaid)."""
    found: dict[str, str] = {}
    for name in inputs:
        for probe in PROBES:
            expr = (
                f'let i = (builtins.getFlake "{locked_url}").inputs."{name}"; '
                f'p = i.legacyPackages."{system}" or {{}}; '
                f'in if p ? "{probe}" then p."{probe}".drvPath else null'
            )
            try:
                drv = nix.eval_expr(expr, env)
            except nix.NixError:
                break
            if isinstance(drv, str):
                found[name] = drv
                break
    return found


def used_by(build_closure: set[str], probes: Mapping[str, str]) -> list[str]:
    return sorted(name for name, drv in probes.items() if drv in build_closure)

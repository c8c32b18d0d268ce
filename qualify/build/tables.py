"""The build check's saved closures turned into the report's tables and diffs."""

from __future__ import annotations

from typing import Any

import pandas as pd

from qualify.build.closure import Package, diff_closures, diff_summary, package_of, store_name
from qualify.checks.base import SavedCheck, TableData
from qualify.core.runstore import read_json

CHANGES = ("added", "removed", "upgraded", "downgraded", "changed", "rebuilt", "identical")


def column(saved: SavedCheck, role: str, name: str, field: str) -> list[str]:
    path = saved.role_dir(role) / name
    return [str(v) for v in pd.read_csv(path)[field]] if path.is_file() else []


def _packages(saved: SavedCheck, role: str, kind: str) -> list[Package]:
    if kind == "build":
        return [package_of(d) for d in column(saved, role, "build-closure.csv", "drv")]
    records = pd.read_csv(saved.role_dir(role) / "runtime-closure.csv").to_dict("records")
    return [
        package_of(
            str(r["path"]),
            None if pd.isna(r["deriver"]) else str(r["deriver"]),
            int(r["size"]),
        )
        for r in records
    ]


def write_diff(saved: SavedCheck, kind: str) -> pd.DataFrame:
    """Diff pinned -> candidate for the `runtime` or `build` closure; saved as CSV too."""
    diff = diff_closures(_packages(saved, "pinned", kind), _packages(saved, "candidate", kind))
    diff.to_csv(saved.folder / f"{kind}-closure-diff.csv", index=False)
    return diff


def diff_table(diff: pd.DataFrame, label: str) -> TableData:
    summary = diff_summary(diff)
    counts = ", ".join(f"{summary[k]} {k}" for k in CHANGES if summary.get(k))
    rows = []
    for r in diff[diff["change"] != "identical"].to_dict("records"):
        delta = r["size_delta"]
        rows.append(
            (
                r["pname"],
                r["output"],
                r["change"],
                r["left_versions"],
                r["right_versions"],
                "" if pd.isna(delta) else f"{int(delta):+,}",
                "PEP 440 orders these the other way" if r["pep440_disagrees"] else "",
            )
        )
    return TableData(
        f"{label}: pinned → candidate ({counts or 'empty'})",
        ("package", "output", "change", "pinned", "candidate", "Δ bytes", "note"),
        tuple(rows),
        collapsed=True,  # long lists; the summary line and the toolchain table say what moved
    )


def arms_table(builds: dict[str, dict[str, Any] | None], saved: SavedCheck) -> TableData:
    rows = []
    for role, m in builds.items():
        if m is None:
            continue
        closure = saved.role_dir(role) / "runtime-closure.csv"
        size = "—"
        if closure.is_file():
            frame = pd.read_csv(closure)
            size = f"{len(frame)} paths, {int(frame['size'].sum()) / 1e6:.1f} MB"
        failed = [b for b in m.get("built", []) if isinstance(b, dict) and b.get("failed")]
        built: object = len(m.get("built", [])) - len(failed)
        if failed:
            built = f"{built}, {len(failed)} failed"
        elif m.get("shared_build_with"):
            built = f"{built} (shares {m['shared_build_with']}'s build)"
        elif m.get("ok") and built == 0:
            built = "0 (already in the store)"
        rows.append(
            (
                role,
                m["arm"],
                m["installable"],
                m.get("out") or "—",
                "ok" if m.get("ok") else "FAILED",
                f"{m['seconds']:.1f} s",
                built,
                size,
            )
        )
    columns = (
        "role",
        "arm",
        "installable",
        "store path",
        "build",
        "wall time",
        "derivations built",
        "runtime closure",
    )
    return TableData("Arms", columns, tuple(rows))


def built_where_table(builds: dict[str, dict[str, Any] | None]) -> TableData | None:
    """Every derivation a role built: the machine that built it (a remote builder's store URI,
    or this machine) and how long it took. None when nothing was built."""
    rows = []
    for role, m in builds.items():
        for b in (m or {}).get("built", []):
            if not isinstance(b, dict):
                continue
            seconds = b.get("seconds")
            rows.append(
                (
                    role,
                    store_name(str(b.get("drv", ""))).removesuffix(".drv"),
                    b.get("machine") or "this machine",
                    "—" if seconds is None else f"{seconds:.1f} s",
                    "FAILED" if b.get("failed") else "ok",
                )
            )
    if not rows:
        return None
    machines = sorted({str(r[2]) for r in rows})
    return TableData(
        f"Derivations built, and where ({', '.join(machines)})",
        ("role", "derivation", "built on", "time", "result"),
        tuple(rows),
        collapsed=len(rows) > 20,
    )


def toolchain_table(found: dict[str, dict[str, list[str]]]) -> TableData:
    components = sorted({c for per_role in found.values() for c in per_role})
    roles = list(found)
    rows = tuple((c, *(", ".join(found[r].get(c, [])) or "—" for r in roles)) for c in components)
    return TableData("Toolchain (build-time closure)", ("component", *roles), rows)


def inputs_table(saved: SavedCheck) -> TableData:
    """Each role's flake inputs side by side, with the fields that differ marked."""
    used: dict[str, dict[str, Any]] = {}
    for role in ("pinned", "candidate"):
        path = saved.role_dir(role) / "inputs.json"
        used[role] = read_json(path) if path.is_file() else {"method": "unknown", "inputs": {}}
    left_inputs: dict[str, Any] = used["pinned"]["inputs"]
    right_inputs: dict[str, Any] = used["candidate"]["inputs"]
    if not left_inputs and not right_inputs and not used["pinned"].get("flake_inputs"):
        return TableData(
            "Flake inputs",
            ("field", "pinned", "candidate", ""),
            (("inputs", "the flake has no inputs", "the flake has no inputs", ""),),
        )
    rows: list[tuple[Any, ...]] = [
        ("attributed by", used["pinned"]["method"], used["candidate"]["method"], "")
    ]
    left_names, right_names = sorted(left_inputs) or [""], sorted(right_inputs) or [""]
    for left_name, right_name in zip(left_names, right_names, strict=False):
        left, right = left_inputs.get(left_name, {}), right_inputs.get(right_name, {})
        same = left_name == right_name
        rows.append(("input", left_name or "—", right_name or "—", "" if same else "differs"))
        for name in ("original", "rev", "narHash", "lastModified"):
            a, b = left.get(name), right.get(name)
            rows.append((name, "—" if a is None else a, "—" if b is None else b, "differs" if a != b else ""))
    return TableData("Flake inputs", ("field", "pinned", "candidate", ""), tuple(rows))


def plan_table(plan: dict[str, Any]) -> TableData:
    """The dry run's cost estimate: what each role builds alone, shares, and fetches."""
    rows: list[tuple[Any, ...]] = []
    for role, entry in plan.get("roles", {}).items():
        if "error" in entry:
            rows.append((role, "evaluation failed", "", "", entry["error"]))
            continue
        rows.append(
            (
                role,
                len(entry.get("will_build", [])),
                len(entry.get("exclusive", [])),
                len(entry.get("shared", [])),
                f"{len(entry.get('will_fetch', []))}"
                + (f" ({entry['fetch_summary']})" if entry.get("fetch_summary") else ""),
            )
        )
    return TableData(
        "Build plan (dry run before building)",
        ("role", "derivations to build", "its own", "shared with another role", "paths to fetch"),
        tuple(rows),
    )

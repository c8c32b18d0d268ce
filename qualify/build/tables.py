"""The build check's saved closures turned into the report's tables and diffs."""

from __future__ import annotations

from typing import Any

import pandas as pd

from qualify.build.closure import Package, diff_closures, package_of, store_name
from qualify.build.substituted import paths
from qualify.checks.base import SavedCheck
from qualify.checks.figures import Cell, Table
from qualify.records.build import BuildMeasurement, BuildPlan, ClosureDiff, InputsUsed, InputUsed


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


def diff_table(diff: pd.DataFrame, summary: ClosureDiff, label: str) -> Table:
    counts = ", ".join(f"{n} {change}" for change, n in summary.changes().items() if n)
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
    return Table(
        title=f"{label}: pinned → candidate ({counts or 'empty'})",
        columns=("package", "output", "change", "pinned", "candidate", "Δ bytes", "note"),
        rows=tuple(rows),
        collapsed=True,  # long lists; the summary line and the toolchain table say what moved
    )


def arms_table(builds: dict[str, BuildMeasurement | None], saved: SavedCheck) -> Table:
    rows: list[tuple[Cell, ...]] = []
    for role, m in builds.items():
        if m is None:
            continue
        closure = saved.role_dir(role) / "runtime-closure.csv"
        size = "—"
        if closure.is_file():
            frame = pd.read_csv(closure)
            size = f"{len(frame)} paths, {int(frame['size'].sum()) / 1e6:.1f} MB"
        failed = [b for b in m.built if b.failed]
        built: Cell = len(m.built) - len(failed)
        if failed:
            built = f"{built}, {len(failed)} failed"
        elif m.shared_build_with:
            built = f"{built} (shares {m.shared_build_with}'s build)"
        elif m.ok and built == 0 and m.substitution is not None and m.substitution.total():
            built = f"0 ({paths(m.substitution.total())} substituted)"
        elif m.ok and built == 0:
            built = "0 (already in the store)"
        rows.append(
            (
                role,
                m.arm,
                m.installable,
                m.out or "—",
                "ok" if m.ok else "FAILED",
                f"{m.seconds:.1f} s",
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
    return Table(title="Arms", columns=columns, rows=tuple(rows))


def built_where_table(builds: dict[str, BuildMeasurement | None]) -> Table | None:
    """Every derivation a role built: the machine that built it (a remote builder's store URI,
    or this machine) and how long it took. None when nothing was built."""
    rows = []
    for role, m in builds.items():
        for b in m.built if m else []:
            rows.append(
                (
                    role,
                    store_name(b.drv).removesuffix(".drv"),
                    b.machine or "this machine",
                    "—" if b.seconds is None else f"{b.seconds:.1f} s",
                    "FAILED" if b.failed else "ok",
                )
            )
    if not rows:
        return None
    machines = sorted({str(r[2]) for r in rows})
    return Table(
        title=f"Derivations built, and where ({', '.join(machines)})",
        columns=("role", "derivation", "built on", "time", "result"),
        rows=tuple(rows),
        collapsed=len(rows) > 20,
    )


def toolchain_table(found: dict[str, dict[str, list[str]]]) -> Table:
    components = sorted({c for per_role in found.values() for c in per_role})
    roles = list(found)
    rows = tuple((c, *(", ".join(found[r].get(c, [])) or "—" for r in roles)) for c in components)
    return Table(title="Toolchain (build-time closure)", columns=("component", *roles), rows=rows)


def inputs_table(saved: SavedCheck) -> Table:
    """Each role's flake inputs side by side, with the fields that differ marked."""
    unknown = InputsUsed(method="unknown", inputs={}, flake_inputs=[])
    used: dict[str, InputsUsed] = {}
    for role in ("pinned", "candidate"):
        path = saved.role_dir(role) / "inputs.json"
        used[role] = InputsUsed.read(path) if path.is_file() else unknown
    left_inputs, right_inputs = used["pinned"].inputs, used["candidate"].inputs
    if not left_inputs and not right_inputs and not used["pinned"].flake_inputs:
        return Table(
            title="Flake inputs",
            columns=("field", "pinned", "candidate", ""),
            rows=(("inputs", "the flake has no inputs", "the flake has no inputs", ""),),
        )
    rows: list[tuple[Any, ...]] = [("attributed by", used["pinned"].method, used["candidate"].method, "")]
    left_names, right_names = sorted(left_inputs) or [""], sorted(right_inputs) or [""]
    none = InputUsed()
    for left_name, right_name in zip(left_names, right_names, strict=False):
        left, right = left_inputs.get(left_name, none), right_inputs.get(right_name, none)
        same = left_name == right_name
        rows.append(("input", left_name or "—", right_name or "—", "" if same else "differs"))
        for name, a, b in (
            ("original", left.original, right.original),
            ("rev", left.rev, right.rev),
            ("narHash", left.narHash, right.narHash),
            ("lastModified", left.lastModified, right.lastModified),
        ):
            rows.append((name, "—" if a is None else a, "—" if b is None else b, "differs" if a != b else ""))
    return Table(title="Flake inputs", columns=("field", "pinned", "candidate", ""), rows=tuple(rows))


def plan_table(plan: BuildPlan) -> Table:
    """The dry run's cost estimate: what each role builds alone, shares, and fetches."""
    rows: list[tuple[Any, ...]] = []
    for role, entry in plan.roles.items():
        if entry.error is not None:
            rows.append((role, "evaluation failed", "", "", entry.error))
            continue
        rows.append(
            (
                role,
                len(entry.will_build),
                len(entry.exclusive),
                len(entry.shared),
                f"{len(entry.will_fetch)}" + (f" ({entry.fetch_summary})" if entry.fetch_summary else ""),
            )
        )
    return Table(
        title="Build plan (dry run before building)",
        columns=("role", "derivations to build", "its own", "shared with another role", "paths to fetch"),
        rows=tuple(rows),
    )

"""`qualify doctor`: what this machine offers a qualification run, and what is missing.

Without a project it looks at the machine: nix and whether the nix commands a run uses are
enabled (`nix-command`, flakes) in the environment a run gives nix, the compilers with their
versions, the GPUs and their driver, the kernel log and memory compaction the soak uses. With
`-C PROJECT` it also checks what that project's run will need before it starts: qualify.toml and
the plan load, the flake is there and its arms' installables evaluate, the data files named in
the variables exist, and the numerics stage has the disk it states it needs.

Every problem comes with its fix; a problem a run cannot go past makes `doctor` exit 1.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from qualify.core import provenance
from qualify.core.config import ProjectConfig, load_config
from qualify.core.environment import child_env
from qualify.core.errors import QualifyError
from qualify.core.process import capture
from qualify.core.recordredaction import redact_ref
from qualify.core.redaction import hides, redact_known
from qualify.core.secretsources import remember_named
from qualify.distribution.hostcache import cache_round_trip
from qualify.pipeline.plan import Plan, load_plan

#: What enables the nix commands a run uses, in every nix a run may meet (Nix 2.8 on, Lix).
ENABLE_FLAKES = (
    "enable them where this user's nix reads its settings: add the line "
    "`experimental-features = nix-command flakes` to ~/.config/nix/nix.conf (or /etc/nix/nix.conf "
    "for every user; restart nix-daemon if one runs), or export "
    "NIX_CONFIG=$'experimental-features = nix-command flakes' before running qualify"
)


@dataclass(frozen=True)
class Probe:
    what: str
    ok: bool
    detail: str
    needed_for: str
    #: A run cannot go without it (the rest narrows what a run can measure).
    required: bool = False
    #: What to do about it, when it is not ok.
    fix: str = ""


def version_line(text: str) -> str:
    """The line of a `--version` output that holds the version: nvcc's fourth ("Cuda compilation
    tools, release 13.0, V13.0.88"), gcc's and clang's first."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return next((line for line in lines if re.search(r"\d+\.\d+", line)), lines[0] if lines else "")


def _version(argv: list[str]) -> tuple[bool, str]:
    if shutil.which(argv[0]) is None:
        return False, "not found on PATH"
    code, text = capture(argv, timeout_s=20)
    if code != 0 or not text.strip():
        return False, "found, but `--version` failed"
    return True, f"{version_line(text)} ({shutil.which(argv[0])})"


def nix_features(env: Mapping[str, str]) -> tuple[bool, str]:
    """Whether nix, called with `env` (the environment a run gives it), has the `nix` command
    and flakes: `builtins.getFlake` exists only where flakes are enabled."""
    code, text = capture(
        ["nix", "eval", "--raw", "--expr", 'if builtins ? getFlake then "flakes" else "no flakes"'],
        env=env,
        timeout_s=60,
    )
    if code == 127:
        return False, "nix is not installed"
    if code != 0:
        if "nix-command" in text:
            return False, "the `nix` command (experimental feature nix-command) is disabled"
        return False, f"`nix eval` failed: {text.strip()[-300:]}"
    if text.strip() != "flakes":
        return False, "flakes (experimental feature flakes) are disabled"
    return True, "nix-command and flakes enabled"


def machine(env: Mapping[str, str] | None = None) -> list[Probe]:
    """What this machine offers a run; `env` is what a run gives nix (default: qualify's own)."""
    env = child_env() if env is None else env
    out: list[Probe] = []
    ok, detail = _version(["nix", "--version"])
    out.append(
        Probe(
            "nix",
            ok,
            detail,
            "building arms (build stage)",
            required=True,
            fix="install nix (Debian: apt-get install nix-bin; elsewhere: https://nixos.org/download)",
        )
    )
    if ok:
        ok, detail = nix_features(env)
        out.append(
            Probe("nix flakes", ok, detail, "every nix call of a run", required=True, fix=ENABLE_FLAKES)
        )
    for compiler in ("gcc", "clang", "clang-19", "nvcc"):
        ok, detail = _version([compiler, "--version"])
        out.append(Probe(compiler, ok, detail, "example builds, kernel objects"))
    gpus = provenance.gpus()
    no_driver = [g for g in gpus if not g.get("driver")]
    out.append(
        Probe(
            "GPUs",
            bool(gpus) and not no_driver,
            "; ".join(provenance.describe_gpu(g) for g in gpus) or "none visible",
            "GPU stages",
            fix=(
                "load the GPU's driver (amdgpu, nvidia) and check that this user may open the "
                "device (/dev/kfd, /dev/dri, /dev/nvidia*)"
                if no_driver
                else "run on a machine with the GPU the engine is built for"
            ),
        )
    )
    holders = provenance.gpu_processes()
    out.append(
        Probe(
            "GPU co-tenants",
            not holders,
            f"{len(holders)} process(es) hold a GPU device" if holders else "none seen",
            "clean measurements",
            fix="stop the other processes on the GPU before a run (they disturb timings)",
        )
    )
    ok, detail = _kernel_log()
    out.append(
        Probe(
            "kernel log",
            ok,
            detail,
            "soak: amdgpu/KFD/Xid watch",
            fix="run as root, or set kernel.dmesg_restrict=0",
        )
    )
    ok, detail = _compact_memory()
    out.append(Probe("compact_memory", ok, detail, "soak: memory pressure", fix="run as root"))
    ok, detail = cache_round_trip(env)
    out.append(
        Probe(
            "binary caches",
            ok,
            detail,
            "distribution: the sources' mirror, the signed cache",
            fix='a nix with `nix copy`, `nix key` and zstd (Nix 2.8 or later); or compression = "xz"',
        )
    )
    return out


def probes(project: Path | None = None) -> list[Probe]:
    """The machine's probes, then the project's when one is given."""
    if project is None:
        return machine()

    try:
        load_config(project)
    except QualifyError as exc:
        return [*machine(), _problem("qualify.toml", exc, "loading the project")]
    found = [*machine(_nix_env(project)), *project_probes(project)]
    # CI prints this in the job's log: a secret the project holds is hidden wherever a probe
    # repeats it (nix's error for an arm, a path built from it).
    return [replace(p, detail=redact_known(p.detail), fix=redact_known(p.fix)) for p in found]


def _nix_env(project: Path) -> dict[str, str]:
    """The environment a run gives nix: the build check's (its `env`, the project's
    inherit_env), or qualify's own where the plan does not load."""

    try:
        config = load_config(project)
        plan = load_plan(config.plan_dir)
    except QualifyError:
        return child_env()
    build = next((c for s in plan.stages for c in s.checks if c.kind == "nix-build"), None)
    return child_env(build.env if build else {}, inherit=config.inherit_env)


def project_probes(project: Path) -> list[Probe]:
    """What a run of `project` will need before it starts."""
    from qualify.pipeline.preflight import require_flake
    from qualify.pipeline.templates import check_templates

    config = load_config(project)
    remember_named(config.vars)
    for arm in config.arms.values():
        remember_named(arm.vars)
        remember_named(arm.env)
    out: list[Probe] = [Probe("qualify.toml", True, str(config.path), "the run's arms and variables")]
    try:
        plan = load_plan(config.plan_dir)
        check_templates(plan, config)
    except QualifyError as exc:
        return [*out, _problem("plan", exc, "the run's stages")]
    for check in (c for s in plan.stages for c in s.checks):
        remember_named(check.vars)
        remember_named(check.env)
    stages = ", ".join(s.name for s in plan.stages)
    declared = "".join(f"; {n.name} not applicable ({n.reason})" for n in plan.not_applicable)
    out.append(Probe("plan", True, f"{plan.source}: {stages}{declared}", "the run's stages"))
    never = plan.never_qualifies()
    out.append(
        Probe(
            "can qualify",
            not never,
            "; ".join(never)
            if never
            else "every stage of the default order is in the plan or declared not applicable",
            "a QUALIFIED verdict (else every run ends INCOMPLETE, exit 3)",
            fix="" if not never else f"edit the stage files in {plan.source}",
        )
    )
    builds = any(c.kind == "nix-build" for s in plan.stages for c in s.checks)
    try:
        require_flake(plan, config)
    except QualifyError as exc:
        out.append(_problem("flake", exc, "building the arms"))
    else:
        if builds:
            out += list(_flake_probes(config, _nix_env(project)))
    out += list(_data_files(config, plan))
    out += list(_numerics_disk(config, plan))
    out += list(_host_needs(config, plan))
    return out


def _host_needs(config: ProjectConfig, plan: Plan) -> Iterator[Probe]:
    """What each check needs of this host before a run starts (a signing key, a folder it
    writes: its kind's `preflight`), as `qualify run` will ask it."""
    from qualify.checks.registry import kind_named

    for stage in plan.stages:
        for check in stage.checks:
            problem = kind_named(check.kind, check.name).preflight(check, config)
            if problem is not None:
                yield Probe(
                    f"{stage.name}/{check.name}",
                    False,
                    problem,
                    "running the check",
                    required=True,
                    fix=f"see {stage.file}",
                )


def _problem(what: str, exc: Exception, needed_for: str) -> Probe:
    message = getattr(exc, "message", str(exc))
    hint = getattr(exc, "hint", None) or ""
    return Probe(what, False, message, needed_for, required=True, fix=hint or "see the message")


def _flake_probes(config: ProjectConfig, env: Mapping[str, str]) -> Iterator[Probe]:
    """The flake resolves, and each arm's installable evaluates to a derivation (nothing built)."""
    from qualify.build import nix

    ref = config.flake if ":" in config.flake else str((config.root / config.flake).resolve())
    try:
        source = nix.flake_metadata(ref, env, cwd=config.root)
    except QualifyError as exc:
        yield _problem("flake", exc, "building the arms")
        return
    # What is printed names a URL's token redacted (`oauth2:<redacted>@`): CI keeps this output.
    yield Probe("flake", True, f"{redact_ref(source.locked_url)}", "building the arms")
    for name, arm in sorted(config.arms.items()):
        installable, _ = nix.installable_ref(source, arm.installable)
        argv = ["nix", "eval", "--raw", f"{installable}.drvPath", *arm.nix_args]
        code, text = capture(argv, env=env, cwd=config.root, timeout_s=600)
        what, shown = f"arm {name}", redact_ref(arm.installable)
        if code == 0:
            yield Probe(what, True, f"{shown} → {text.strip()}", "building the arms")
        else:
            yield Probe(
                what,
                False,
                f"{shown} does not evaluate: {text.strip()[-400:]}",
                "building the arms",
                required=True,
                fix=f"fix the flake's output for {shown}, or the arm's installable in "
                f"{config.path} (`nix eval {redact_ref(installable)}.drvPath` shows the error)",
            )


def _data_files(config: ProjectConfig, plan: Plan) -> Iterator[Probe]:
    """Every variable that names a file (`{project}/data/corpus.txt`, an absolute path, or a
    relative path with a folder in it) names one that exists."""

    tables: list[tuple[str, Mapping[str, object]]] = [(f"{config.path}: vars", config.vars)]
    tables += [(f"{config.path}: arms.{n}.vars", a.vars) for n, a in sorted(config.arms.items())]
    tables += [(f"{s.file}: check {c.name!r}, vars", c.vars) for s in plan.stages for c in s.checks]
    for where, table in tables:
        for name, value in table.items():
            if not isinstance(value, str) or hides(name, value):
                continue  # a secret (a token may hold a `/`) is no file to check, and never printed
            text = value.replace("{project}", str(config.root))
            if "{" in text or "/" not in text or text.startswith("-") or "://" in text:
                continue  # another placeholder, a flag, a word, a URL: not a file qualify can check
            path = Path(text)
            what = f"vars.{name}"
            if path.is_absolute():
                found = path.exists()
                yield Probe(
                    what,
                    found,
                    f"{value} ({'found' if found else 'not found'})",
                    "the checks that use it",
                    required=True,
                    fix=f"put the file at {path}, or change {where}.{name}",
                )
            else:
                # A command runs in its role's folder of the run: a relative path is read from
                # there, not from the project.
                yield Probe(
                    what,
                    False,
                    f"{value} is relative: a command reads it from its role's folder in the run",
                    "the checks that use it",
                    required=True,
                    fix=f'write {where}.{name} = "{{project}}/{value}"',
                )


def _numerics_disk(config: ProjectConfig, plan: Plan) -> Iterator[Probe]:
    """Free disk where the runs go against what each kld check will store at its peak: its
    `artifact_bytes`, or the size the last run of the check measured."""
    from qualify.numerics.params import NumericsParams
    from qualify.numerics.store import disk_plan, gib

    where = config.runs_dir if config.runs_dir.exists() else _existing_parent(config.runs_dir)
    for stage in plan.stages:
        for check in stage.checks:
            if check.kind != "kld":
                continue
            params = NumericsParams.of(check)
            size = params.artifact_bytes or _last_artifact_bytes(config.runs_dir, stage.folder, check.name)
            floor = "pinned" in check.roles and params.floor_rerun
            others = ["pinned", *(["pinned.2"] if floor else []), "candidate"]
            disk = disk_plan(
                where,
                size,
                cached=False,
                streamed=params.stream,
                others=others,
                keep=params.keep,
            )
            what = f"disk for {stage.name}/{check.name}"
            if disk.bytes is None:
                yield Probe(
                    what,
                    True,
                    f"{gib(disk.free)} free in {where}; the need is stated once the reference is scored",
                    "the numerics stage",
                    fix="",
                )
                continue
            ok = disk.free >= disk.bytes
            yield Probe(
                what,
                ok,
                f"needs {gib(disk.bytes)} ({', '.join(disk.stored)}), {gib(disk.free)} free in {where}",
                "the numerics stage",
                required=True,
                fix="free disk space, point runs_dir at a larger disk, or score fewer chunks",
            )


def _existing_parent(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _last_artifact_bytes(runs_dir: Path, folder: str, check: str) -> int | None:
    """One artifact's bytes as the newest run of this check recorded it."""
    from qualify.records.numerics import NumericsRecord

    if not runs_dir.is_dir():
        return None
    for run in sorted(runs_dir.iterdir(), reverse=True):
        record = run / folder / check / "numerics.json"
        if not record.is_file():
            continue
        try:
            disk = NumericsRecord.read(record).disk
        except QualifyError:
            continue  # an unreadable record says nothing of the size
        if disk is not None and disk.stored and disk.bytes is not None:
            return disk.bytes // len(disk.stored)
    return None


def _kernel_log() -> tuple[bool, str]:
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return False, f"/dev/kmsg: {exc.strerror}"
    os.close(fd)
    return True, "/dev/kmsg readable"


def _compact_memory() -> tuple[bool, str]:
    path = Path("/proc/sys/vm/compact_memory")
    if not path.exists():
        return False, "kernel has no /proc/sys/vm/compact_memory"
    if os.access(path, os.W_OK):
        return True, "writable"
    return False, "not writable (run as root to apply memory pressure)"

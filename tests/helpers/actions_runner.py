"""A job of a GitHub Actions workflow run step by step, as the runner runs its shell steps.

GitHub's runner cannot run here; this plays its part for the `run:` steps, with what a step
sees on GitHub:

- each `run:` step is a script file run by bash in the job's workspace (`bash -e FILE` where the
  step names no shell, `bash --noprofile --norc -eo pipefail FILE` for `shell: bash`), with
  the workflow's, the job's and the step's `env:`, GitHub's variables (`CI`, `GITHUB_ACTIONS`,
  `GITHUB_WORKSPACE`, `RUNNER_TEMP`, `GITHUB_EVENT_NAME`, `GITHUB_EVENT_PATH`,
  `GITHUB_REPOSITORY`, `GITHUB_API_URL`, `GITHUB_WORKFLOW`, ...), and a fresh file of each of
  `GITHUB_ENV`, `GITHUB_PATH`, `GITHUB_OUTPUT` and `GITHUB_STEP_SUMMARY`;
- what a step writes to `GITHUB_ENV` (`NAME=value` lines, `NAME<<DELIMITER` blocks) is in the
  environment of every later step, a folder it writes to `GITHUB_PATH` is put in front of their
  PATH (the latest first), and its `GITHUB_OUTPUT` is `steps.<id>.outputs`;
- `${{ … }}` in `run:`, `env:`, `with:` and `if:` is evaluated from the contexts given (github,
  vars, inputs, matrix, needs, secrets) and those the runner keeps (env, steps, runner), as
  `actions_expressions` evaluates GitHub's expressions;
- a step that exits non-zero fails the job (unless `continue-on-error`), and later steps run
  only as their `if:` says.

A `uses:` step runs the stand-in given for its action (`actions/checkout`, …) in `actions`, a
callable taking an `ActionCall`; `Artifacts` stands in for upload-artifact and
download-artifact (a folder per artifact, links followed on upload as upload-artifact follows
them). A `uses:` step without a stand-in is an error.

    job = JobRunner(workflow, "qualify", contexts, workspace=project, temp=tmp / "runner")
    job.run(until="Qualify")      # every step before the one named "Qualify…"
    job.skip("Qualify")           # as if its `if:` were false
    job.run()                     # the rest
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import yaml
from helpers.actions_expressions import condition, evaluate, substitute, text_of

__all__ = [
    "ActionCall",
    "Artifacts",
    "JobRunner",
    "StepRun",
    "condition",
    "evaluate",
    "read_github_env",
    "substitute",
    "text_of",
]

# -- the runner's files -----------------------------------------------------------------------


def read_github_env(file: Path) -> dict[str, str]:
    """`NAME=value` lines and `NAME<<DELIMITER` blocks, as the runner reads $GITHUB_ENV (and
    $GITHUB_OUTPUT)."""
    values: dict[str, str] = {}
    lines = iter(file.read_text().splitlines()) if file.is_file() else iter(())
    for line in lines:
        if "<<" in line:
            name, delimiter = line.split("<<", 1)
            block = []
            for inner in lines:
                if inner == delimiter:
                    break
                block.append(inner)
            values[name] = "\n".join(block)
        elif "=" in line:
            name, value = line.split("=", 1)
            values[name] = value
    return values


@dataclass
class StepRun:
    name: str
    outcome: str  # success, failure or skipped
    returncode: int | None = None
    output: str = ""
    seconds: float = 0.0


@dataclass
class ActionCall:
    """What a `uses:` step's stand-in is given: its `with:` evaluated, and the runner to act on."""

    uses: str
    inputs: dict[str, str]
    env: dict[str, str]
    runner: JobRunner

    def add_path(self, folder: Path) -> None:
        self.runner.path.append(str(folder))


@dataclass
class Artifacts:
    """upload-artifact and download-artifact: a folder per artifact under `store`."""

    store: Path
    uploaded: list[str] = field(default_factory=list)

    def upload(self, call: ActionCall) -> None:
        name, target = call.inputs.get("name", "artifact"), self.store / call.inputs.get("name", "artifact")
        sources = [Path(line.strip()) for line in call.inputs["path"].splitlines() if line.strip()]
        found = [s if s.is_absolute() else call.runner.workspace / s for s in sources]
        found = [s for s in found if s.exists()]
        if not found:
            if call.inputs.get("if-no-files-found", "warn") == "error":
                raise FileNotFoundError(f"upload-artifact {name}: no files at {sources}")
            return
        for source in found:  # like upload-artifact, a folder's content at the artifact's root
            if source.is_dir():
                shutil.copytree(source, target, symlinks=False, dirs_exist_ok=True)
            else:
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target / source.name)
        self.uploaded.append(name)

    def download(self, call: ActionCall) -> None:
        into = Path(call.inputs.get("path") or call.runner.workspace)
        if call.inputs.get("name"):
            shutil.copytree(self.store / call.inputs["name"], into, dirs_exist_ok=True)
            return
        pattern = call.inputs.get("pattern", "*")
        for artifact in sorted(self.store.iterdir()):
            if fnmatchcase(artifact.name, pattern):
                shutil.copytree(artifact, into / artifact.name, dirs_exist_ok=True)

    def stand_ins(self) -> dict[str, Callable[[ActionCall], None]]:
        return {"actions/upload-artifact": self.upload, "actions/download-artifact": self.download}


# -- the job ----------------------------------------------------------------------------------


class JobRunner:
    """One job of `workflow`, its steps run in order (`run`), the runner's state kept between."""

    def __init__(
        self,
        workflow: Path,
        job: str,
        contexts: Mapping[str, Any],
        *,
        workspace: Path,
        temp: Path,
        env: Mapping[str, str],
        actions: Mapping[str, Callable[[ActionCall], None]] | None = None,
        timeout: float = 1200,
    ) -> None:
        document = yaml.safe_load(workflow.read_text())
        self.workflow, self.name = document, job
        self.job: dict[str, Any] = document["jobs"][job]
        self.steps: list[dict[str, Any]] = self.job["steps"]
        self.workspace, self.temp, self.base_env = workspace, temp, dict(env)
        self.actions = dict(actions or {})
        self.timeout = timeout
        self.position = 0
        self.status = "success"
        self.env: dict[str, str] = {}  # what steps wrote to GITHUB_ENV
        self.path: list[str] = []  # what steps wrote to GITHUB_PATH, in order
        self.runs: list[StepRun] = []
        self.summary = ""
        temp.mkdir(parents=True, exist_ok=True)
        self.contexts: dict[str, Any] = copy.deepcopy(dict(contexts))
        github = self.contexts.setdefault("github", {})
        github.setdefault("workspace", str(workspace))
        github.setdefault("job", job)
        self.contexts["runner"] = {"temp": str(temp), "os": "Linux", "arch": "X64"}
        self.contexts["steps"] = {}
        self.contexts.setdefault("needs", {})
        self.event_path = temp / "_event.json"
        self.event_path.write_text(json.dumps(github.get("event") or {}))

    # The environment a step starts with.
    def _github_variables(self) -> dict[str, str]:
        github = self.contexts["github"]
        named = {
            "GITHUB_EVENT_NAME": "event_name",
            "GITHUB_REPOSITORY": "repository",
            "GITHUB_API_URL": "api_url",
            "GITHUB_SERVER_URL": "server_url",
            "GITHUB_WORKFLOW": "workflow",
            "GITHUB_REF": "ref",
            "GITHUB_SHA": "sha",
            "GITHUB_RUN_ID": "run_id",
        }
        variables = {var: text_of(github[key]) for var, key in named.items() if github.get(key) is not None}
        return {
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_JOB": self.name,
            "GITHUB_WORKSPACE": str(self.workspace),
            "GITHUB_EVENT_PATH": str(self.event_path),
            "RUNNER_TEMP": str(self.temp),
            "RUNNER_OS": "Linux",
            **variables,
        }

    def _evaluated(self, values: Mapping[str, Any] | None, env: dict[str, str]) -> dict[str, str]:
        out = {}
        for name, value in (values or {}).items():
            out[name] = substitute(text_of(value), {**self.contexts, "env": {**env, **out}}, self.status)
        return out

    def step_env(self, step: Mapping[str, Any]) -> dict[str, str]:
        env = {**self.base_env, **self._github_variables()}
        env.update(self._evaluated(self.workflow.get("env"), env))
        env.update(self._evaluated(self.job.get("env"), env))
        env.update(self.env)
        env.update(self._evaluated(step.get("env"), env))
        env["PATH"] = ":".join([*reversed(self.path), self.base_env.get("PATH", "/usr/bin:/bin")])
        return env

    def wanted(self) -> bool:
        """The job's own `if:`, decided from the contexts (`needs` included)."""
        return condition(self.job.get("if"), self.contexts)

    def _find(self, name: str) -> int:
        for index in range(self.position, len(self.steps)):
            if str(self.steps[index].get("name", self.steps[index].get("uses", ""))).startswith(name):
                return index
        raise LookupError(f"no step named {name!r} after step {self.position} of job {self.name}")

    def run(self, until: str | None = None) -> list[StepRun]:
        """The steps from here to the end, or to the one whose name starts with `until`."""
        end = self._find(until) if until is not None else len(self.steps)
        done = []
        while self.position < end:
            done.append(self._step(self.steps[self.position]))
            self.position += 1
        return done

    def run_step(self, name: str) -> list[StepRun]:
        """The step named `name…` alone, the steps before it left out (a test of one step)."""
        self.position = self._find(name)
        done = [self._step(self.steps[self.position])]
        self.position += 1
        return done

    def skip(self, name: str) -> None:
        """The next step, named `name…`, left out as a false `if:` leaves it."""
        step = self.steps[self._find(name)]
        assert self._find(name) == self.position, f"{name!r} is not the next step"
        self.runs.append(StepRun(str(step.get("name", step.get("uses"))), "skipped"))
        if "id" in step:
            self.contexts["steps"][step["id"]] = {
                "outputs": {},
                "outcome": "skipped",
                "conclusion": "skipped",
            }
        self.position += 1

    def outputs(self) -> dict[str, str]:
        """The job's `outputs:`, as `needs.<job>.outputs` gives them to later jobs."""
        return {
            k: substitute(text_of(v), self.contexts, self.status)
            for k, v in self.job.get("outputs", {}).items()
        }

    def step(self, name: str) -> StepRun:
        return next(r for r in self.runs if r.name.startswith(name))

    def _step(self, step: dict[str, Any]) -> StepRun:
        name = str(step.get("name", step.get("uses", step.get("run", "")).split("\n")[0]))
        env = self.step_env(step)
        self.contexts["env"] = env
        started = time.monotonic()
        if not condition(step.get("if"), self.contexts, self.status):
            result = StepRun(name, "skipped")
        elif "uses" in step:
            result = self._action(step, name, env)
        else:
            result = self._script(step, name, env)
        result.seconds = time.monotonic() - started
        self.runs.append(result)
        if result.outcome == "failure" and not step.get("continue-on-error"):
            self.status = "failure"
        return result

    def _action(self, step: dict[str, Any], name: str, env: dict[str, str]) -> StepRun:
        action = str(step["uses"]).split("@")[0]
        if action not in self.actions:
            raise LookupError(f"no stand-in for `uses: {step['uses']}` (step {name!r}): pass one in actions")
        call = ActionCall(str(step["uses"]), self._evaluated(step.get("with"), env), env, self)
        try:
            self.actions[action](call)
        except Exception as exc:
            return StepRun(name, "failure", 1, f"{type(exc).__name__}: {exc}")
        return StepRun(name, "success", 0)

    def _script(self, step: dict[str, Any], name: str, env: dict[str, str]) -> StepRun:
        number = len(self.runs)
        files = self.temp / "_runner" / str(number)
        files.mkdir(parents=True, exist_ok=True)
        names = ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY")
        for var in names:
            (files / var).write_text("")
            env[var] = str(files / var)
        script = files / "script.sh"
        script.write_text(substitute(str(step["run"]), {**self.contexts, "env": env}, self.status))
        shell = step.get("shell") or (self.job.get("defaults") or {}).get("run", {}).get("shell")
        argv = ["bash", "--noprofile", "--norc", "-eo", "pipefail"] if shell == "bash" else ["bash", "-e"]
        where = self.workspace / str(step.get("working-directory", "."))
        minutes = step.get("timeout-minutes")
        done = subprocess.run(
            [*argv, str(script)],
            cwd=where,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=float(minutes) * 60 if minutes else self.timeout,
            check=False,
        )
        self.env.update(read_github_env(files / "GITHUB_ENV"))
        self.path += (
            (files / "GITHUB_PATH").read_text().split("\n") if (files / "GITHUB_PATH").stat().st_size else []
        )
        self.path = [p for p in self.path if p]
        self.summary += (files / "GITHUB_STEP_SUMMARY").read_text()
        outcome = "success" if done.returncode == 0 else "failure"
        if "id" in step:
            outputs = read_github_env(files / "GITHUB_OUTPUT")
            self.contexts["steps"][step["id"]] = {
                "outputs": outputs,
                "outcome": outcome,
                "conclusion": outcome,
            }
        return StepRun(name, outcome, done.returncode, done.stdout)

"""The serving suites by name, in the order they run, and the loop that runs them on one role."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from qualify.records.serving import ServerDeath
from qualify.serving import suites_features as features
from qualify.serving import suites_text as text
from qualify.serving.cases import Case, Suite, SuiteRun
from qualify.serving.client import ServerGone

SUITES: dict[str, Suite] = {
    "readiness": text.readiness,
    "completion": text.completion,
    "streaming": text.streaming,
    "chat": text.chat,
    "long-context": text.long_context,
    "prefix-cache": features.prefix_cache,
    "tools": features.tools,
    "structured-output": features.structured,
    "sampling": features.sampling,
    "concurrency": features.concurrency,
}


@dataclass
class SuitesDone:
    """One role's cases, the suites reached, and how the server died if it did."""

    cases: list[Case] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)
    died: ServerDeath | None = None


def run_suites(run: SuiteRun, names: list[str], tail: Any) -> SuitesDone:
    """Run `names` in order; when the server dies, stop and list the rest as not run.

    `tail` is a callable giving the server log's last lines (saved with the death).
    """
    done = SuitesDone()
    for index, name in enumerate(names):
        run.progress(name)
        try:
            cases = SUITES[name](run)
        except ServerGone as exc:
            done.died = ServerDeath(suite=name, message=str(exc), log_tail=list(tail()))
            done.not_run = names[index:]
            break
        finally:
            run.progress(None)
        done.cases.extend(cases)
        done.ran.append(name)
    return done

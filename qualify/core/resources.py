"""Where the data shipped with qualify lives: the default plan and the report templates.

In a wheel they are force-included under `qualify/_data/`; in a source checkout they are the
top-level `stages/` and `reports/` folders.
"""

from __future__ import annotations

from pathlib import Path

from qualify.core.errors import QualifyError

_PACKAGE = Path(__file__).resolve().parent.parent  # qualify/, above core/


def data_dir(name: str) -> Path:
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise QualifyError(
        f"qualify's {name}/ data folder is missing next to {_PACKAGE}",
        "reinstall qualify; the wheel ships stages/ and reports/ as package data",
    )

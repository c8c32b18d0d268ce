"""The `qualify` command line: thin commands, each calling one function.

`app` holds the error handling and the options every command shares; importing this package
registers the commands on it (typer's decorators), starting work in `running`, reading what
exists in `reading`.
"""

from qualify.cli import bisecting, merging, reading, remedying, running
from qualify.cli.app import app, main

__all__ = ["app", "bisecting", "main", "merging", "reading", "remedying", "running"]

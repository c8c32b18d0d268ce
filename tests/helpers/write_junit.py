"""A test command that writes JUnit XML with the given outcomes and exits like a test driver.

Usage: write_junit.py OUT name=passed|failed|error|skipped ...  (exit 8 if any failed)
"""

import sys
from xml.sax.saxutils import quoteattr

out, *cases = sys.argv[1:]
body = []
failed = False
for case in cases:
    name, status = case.split("=")
    inner = {
        "failed": "<failure message='boom'/>",
        "error": "<error message='crash'/>",
        "skipped": "<skipped/>",
    }.get(status, "")
    failed |= status in ("failed", "error")
    body.append(f"<testcase classname={quoteattr(name)} name={quoteattr(name)}>{inner}</testcase>")
with open(out, "w") as handle:
    handle.write(f"<testsuites><testsuite name='s'>{''.join(body)}</testsuite></testsuites>")
sys.exit(8 if failed else 0)

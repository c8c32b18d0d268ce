"""A check command that reports given samples in qualify's metrics JSON.

Usage: emit_metrics.py OUT NAME:higher|lower:s1,s2,... [NAME:...]
"""

import json
import sys

out, *specs = sys.argv[1:]
metrics = []
for spec in specs:
    name, direction, samples = spec.split(":")
    metrics.append(
        {
            "name": name,
            "unit": "u",
            "higher_is_better": direction == "higher",
            "samples": [float(s) for s in samples.split(",") if s],
        }
    )
with open(out, "w") as handle:
    json.dump({"schema_version": 1, "metrics": metrics}, handle)

"""Compress a fixed corpus at a zlib level and write qualify's metrics JSON.

The corpus is the source of a few standard-library modules of the running Python, so both
arms read the same bytes.
"""

from __future__ import annotations

import argparse
import importlib
import json
import time
import zlib
from pathlib import Path

MODULES = ("argparse", "json.decoder", "email.message", "http.client", "textwrap", "difflib")


def corpus() -> bytes:
    parts = []
    for name in MODULES:
        module = importlib.import_module(name)
        parts.append(Path(str(module.__file__)).read_bytes())
    return b"".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--level", type=int, required=True)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    data = corpus()
    ratios, speeds = [], []
    for _ in range(args.repetitions):
        start = time.perf_counter()
        packed = zlib.compress(data, args.level)
        elapsed = time.perf_counter() - start
        assert zlib.decompress(packed) == data
        ratios.append(len(data) / len(packed))
        speeds.append(len(data) / elapsed / 1e6)
    document = {
        "schema_version": 1,
        "metrics": [
            {"name": "ratio", "unit": "x", "higher_is_better": True, "samples": ratios},
            {"name": "throughput", "unit": "MB/s", "higher_is_better": True, "samples": speeds},
        ],
    }
    args.out.write_text(json.dumps(document, indent=2))
    print(f"level {args.level}: ratio {ratios[0]:.3f}, {min(speeds):.1f}-{max(speeds):.1f} MB/s")


if __name__ == "__main__":
    main()

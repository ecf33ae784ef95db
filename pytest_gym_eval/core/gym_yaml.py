"""Reading Gym's YAML config files without a YAML library of the plugin's own.

The plugin's runtime dependencies are pytest, pluggy and jsonlines; Gym's own environment (a Python 3.13 venv in
the checkout, ``<checkout>/.venv``) has PyYAML, as Gym reads its configs with it. :func:`read_yaml_files` runs
that Python once for a batch of files and gets their contents back as JSON, so the plugin reads a config the way
Gym does (``yaml.safe_load``) and never imports Gym or PyYAML itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

READ_TIMEOUT = 60.0
"""Seconds one batch may take (Gym's Python starting on a loaded machine, then a few small files)."""

_SCRIPT = """
import json, sys, yaml
out = {}
for name in sys.argv[1:]:
    try:
        with open(name, encoding="utf-8") as handle:
            out[name] = yaml.safe_load(handle)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        out[name] = None
print(json.dumps(out, default=str))
"""


def gym_python(checkout: Path) -> Path | None:
    """The Python of Gym's environment in ``checkout`` (``.venv/bin/python``), or None when it has none (a
    checkout not provisioned yet, or a test's synthetic one)."""
    python = checkout / ".venv" / "bin" / "python"
    return python if python.exists() else None


def read_yaml_files(paths: Sequence[Path], checkout: Path) -> dict[Path, Any]:
    """Each of ``paths`` read with ``yaml.safe_load`` by the Python of ``checkout``'s Gym environment (the current
    Python when the checkout has none), in one process. A file that is missing, not UTF-8 or not YAML is left out
    (Gym reports it when it starts); so are all of them when that Python has no PyYAML or cannot run.
    Values a JSON round trip cannot keep (dates) come back as strings."""
    if not paths:
        return {}
    python = gym_python(checkout) or Path(sys.executable)
    try:
        done = subprocess.run(
            [str(python), "-c", _SCRIPT, *map(str, paths)],
            capture_output=True,
            text=True,
            timeout=READ_TIMEOUT,
            check=False,
        )
        read = json.loads(done.stdout) if done.returncode == 0 else {}
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return {}
    return {Path(name): data for name, data in read.items() if data is not None}

"""One place for what every benchmark's JSON records about where it ran."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any


def write_results(path: Path, fields: dict[str, Any]) -> None:
    """Write ``fields`` plus the machine (platform, Python, CPUs, load average now) as JSON to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    machine = {"load_average": os.getloadavg(), "machine": platform.platform(),
               "python": platform.python_version(), "cpus": os.cpu_count()}
    path.write_text(json.dumps({**fields, **machine}, indent=1))
    print(f"wrote {path}")

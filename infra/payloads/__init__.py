"""Scripts shipped into the cluster in ConfigMaps. Each is standalone (stdlib, plus numpy and NIXL
for the KV probe): it runs in a plain image, so it imports nothing from this project. Beside them,
the benchmark Job's hash-pinned AIPerf requirements (`python3 dev.py lock-bench` writes them)."""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
AIPERF_REQUIREMENTS = "aiperf-requirements.txt"


def path(name: str) -> Path:
    """The file of a payload, e.g. path('kv_probe.py'), to run it locally."""
    return HERE / name


def source(name: str) -> str:
    """The text of a payload, as it goes into a ConfigMap."""
    return path(name).read_text()


def locked_aiperf() -> str:
    """The AIPerf version the benchmark's requirements pin."""
    match = re.search(r"^aiperf==(\S+)", source(AIPERF_REQUIREMENTS), re.MULTILINE)
    if match is None:
        raise ValueError(f"{AIPERF_REQUIREMENTS} pins no aiperf: run python3 dev.py lock-bench")
    return match.group(1)

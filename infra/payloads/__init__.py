"""Scripts shipped into the cluster in ConfigMaps. Each is standalone (stdlib, plus numpy and NIXL
for the KV probe): it runs in a plain image, so it imports nothing from this project."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


def path(name: str) -> Path:
    """The file of a payload, e.g. path('kv_probe.py'), to run it locally."""
    return HERE / name


def source(name: str) -> str:
    """The text of a payload, as it goes into a ConfigMap."""
    return path(name).read_text()

"""The pinned Dynamo release's own data files (the graph CRD, the platform chart's values and
Chart.yaml), for the conformance checks. Never copied into this repository; found, in this order:

1. the directory named by $DYNAMO_LAB_UPSTREAM_DIR (same layout as below);
2. `../shared/upstream/dynamo/` beside the project, where a team workspace keeps reference copies;
3. a cache, `$XDG_CACHE_HOME/dynamo-lab/upstream/<tag>/` (default `~/.cache/...`), filled by
   downloading each file from the upstream repository at the pinned tag. The first download
   records each file's sha256 in the cache's SHA256SUMS; every later use checks the file against it.

Layout: `crds/nvidia.com_dynamographdeployments.yaml`, `helm/platform/values.yaml`,
`helm/platform/Chart.yaml`.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from infra.config.models import Platform
from infra.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
# The chart version the stacks install is the release whose files we check against.
TAG = f"v{Platform().version}"
REPOSITORY = "https://raw.githubusercontent.com/ai-dynamo/dynamo"
# Local name -> path in the upstream repository.
FILES = {
    "crds/nvidia.com_dynamographdeployments.yaml":
        "deploy/operator/config/crd/bases/nvidia.com_dynamographdeployments.yaml",
    "helm/platform/values.yaml": "deploy/helm/charts/platform/values.yaml",
    "helm/platform/Chart.yaml": "deploy/helm/charts/platform/Chart.yaml",
}
SUMS = "SHA256SUMS"
HOW = (f"set DYNAMO_LAB_UPSTREAM_DIR to a directory holding {' and '.join(FILES)} from Dynamo {TAG}, "
       f"or let the tests download them from {REPOSITORY}/{TAG}/")


class UpstreamUnavailable(UserError):
    pass


@dataclass(frozen=True)
class Upstream:
    directory: Path

    def file(self, name: str) -> Path:
        return self.directory / name


def _complete(directory: Path) -> bool:
    return all((directory / name).is_file() for name in FILES)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "dynamo-lab" / "upstream" / TAG


def _verified_cache(directory: Path) -> bool:
    """True when the cache holds every file and each matches the sha256 recorded at download."""
    sums_file = directory / SUMS
    if not (_complete(directory) and sums_file.is_file()):
        return False
    sums = dict(line.split("  ", 1)[::-1] for line in sums_file.read_text().splitlines() if line)
    for name in FILES:
        if sums.get(name) != _sha256(directory / name):
            raise UpstreamUnavailable(f"{directory / name} no longer matches the sha256 recorded when it was "
                                      f"downloaded; delete {directory} to download it again")
    return True


def _download(directory: Path, base_url: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    lines = []
    for name, upstream_path in FILES.items():
        url = f"{base_url}/{TAG}/{upstream_path}"
        try:
            with urllib.request.urlopen(url, timeout=20) as resp:
                data = resp.read()
        except (urllib.error.URLError, OSError) as exc:
            raise UpstreamUnavailable(f"could not download {url} ({getattr(exc, 'reason', exc)})") from None
        target = directory / name
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(target.suffix + ".part")
        partial.write_bytes(data)
        partial.replace(target)
        lines.append(f"{hashlib.sha256(data).hexdigest()}  {name}")
    (directory / SUMS).write_text("\n".join(lines) + "\n")


def locate() -> Upstream:
    """The upstream files, from the first place that has them all; UpstreamUnavailable otherwise."""
    named = os.environ.get("DYNAMO_LAB_UPSTREAM_DIR")
    if named:
        if not _complete(Path(named)):
            raise UpstreamUnavailable(f"DYNAMO_LAB_UPSTREAM_DIR={named} lacks some of {', '.join(FILES)}")
        return Upstream(Path(named))
    workspace = ROOT.parent / "shared" / "upstream" / "dynamo"
    if _complete(workspace):
        return Upstream(workspace)
    cache = cache_dir()
    if not _verified_cache(cache):
        _download(cache, os.environ.get("DYNAMO_LAB_UPSTREAM_URL", REPOSITORY))
    return Upstream(cache)

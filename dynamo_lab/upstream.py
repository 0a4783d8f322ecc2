"""The pinned Dynamo data files (the graph CRD, the platform chart's values and Chart.yaml), for
the conformance checks and the cluster tier. They are from Dynamo's 1.5.0 development line at
upstream commit 2a6da14c (REF), not from the v1.6.2 release the stacks install, whose files
could not be had here. Never copied into this repository; what is committed is each file's
sha256 (SHA256 below), and every file is checked against it wherever it comes from, in this order:

1. the directory named by $DYNAMO_LAB_UPSTREAM_DIR (same layout as below; CI may point it at a
   reference copy its machines keep);
2. a cache, `$XDG_CACHE_HOME/dynamo-lab/upstream/<REF>/` (default `~/.cache/...`), filled by
   downloading each file from the upstream repository at the pinned commit REF.

A file that differs from its pinned sha256 is refused (UpstreamUnavailable), a download before it
is written: a changed upstream file, a tampered mirror or an edited copy fails the same way on
every machine and in CI, which downloads afresh each run. To move the pin, point REF at the new
upstream commit and set SHA256 to the new files' `sha256sum` (reviewed like any change).

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

from infra.config.schema import Platform
from infra.errors import UserError

# The chart version the stacks install (for messages).
TAG = f"v{Platform().version}"
REPOSITORY = "https://raw.githubusercontent.com/ai-dynamo/dynamo"
# The upstream commit the pinned files are from: ai-dynamo/dynamo main of 2026-08-21 (#13625), whose
# chart is 1.5.0, the newest line whose files this project could read; no v1.6.x tag's files were
# found to pin.
REF = "2a6da14c83617f5412caba5777dbf0e2399e9c5f"
# What the pinned files are, said the same way wherever they are named (messages, the cluster tier).
PROVENANCE = (f"Dynamo's 1.5.0 development line at upstream commit {REF[:8]} (2026-08-21), "
              f"not the {TAG} release the stacks install")
# Local name -> path in the upstream repository.
FILES = {
    "crds/nvidia.com_dynamographdeployments.yaml":
        "deploy/operator/config/crd/bases/nvidia.com_dynamographdeployments.yaml",
    "helm/platform/values.yaml": "deploy/helm/charts/platform/values.yaml",
    "helm/platform/Chart.yaml": "deploy/helm/charts/platform/Chart.yaml",
}
# Local name -> the sha256 of the file at REF: what every copy and download must match.
SHA256 = {
    "crds/nvidia.com_dynamographdeployments.yaml": "055d7331cfbf1cca6864ee9005239de7e869dd79d69418126a52634d009c55d8",
    "helm/platform/values.yaml": "dc006cfad407f57bb10e7280e161c6b17cffdaa935b485afdef35dd669cb7244",
    "helm/platform/Chart.yaml": "1fa573a13b7971742d4aca5d4bf1458df5704542bab884366d642d913a10f074",
}
HOW = (f"set DYNAMO_LAB_UPSTREAM_DIR to a directory holding {' and '.join(FILES)} from Dynamo at {REF[:12]} "
       f"(sha256 pinned in dynamo_lab/upstream.py), or run where {REPOSITORY}/{REF}/ can be reached: they "
       "are downloaded from there")


class UpstreamUnavailable(UserError):
    pass


@dataclass(frozen=True)
class Upstream:
    directory: Path

    def file(self, name: str) -> Path:
        return self.directory / name


def _complete(directory: Path) -> bool:
    return all((directory / name).is_file() for name in FILES)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "dynamo-lab" / "upstream" / REF


def _verified(directory: Path, fix: str) -> Upstream:
    """The directory, if each file matches its pinned sha256; UpstreamUnavailable naming the first that does not."""
    for name in FILES:
        actual = _sha256((directory / name).read_bytes())
        if actual != SHA256[name]:
            raise UpstreamUnavailable(f"{directory / name} has sha256 {actual}, not the {SHA256[name]} pinned in "
                                      f"dynamo_lab/upstream.py for {FILES[name]} at {REF[:12]}; {fix}")
    return Upstream(directory)


def _download(directory: Path, base_url: str) -> None:
    """Each file at REF, checked against its pinned sha256 before it is written."""
    fetched = {}
    for name, upstream_path in FILES.items():
        url = f"{base_url}/{REF}/{upstream_path}"
        try:
            with urllib.request.urlopen(url, timeout=20) as resp:
                data = resp.read()
        except (urllib.error.URLError, OSError) as exc:
            raise UpstreamUnavailable(f"could not download {url} ({getattr(exc, 'reason', exc)})") from None
        if _sha256(data) != SHA256[name]:
            raise UpstreamUnavailable(f"{url} has sha256 {_sha256(data)}, not the {SHA256[name]} pinned in "
                                      "dynamo_lab/upstream.py: refused (the file changed upstream, or the "
                                      "download is not what it claims)")
        fetched[name] = data
    for name, data in fetched.items():
        target = directory / name
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(target.suffix + ".part")
        partial.write_bytes(data)
        partial.replace(target)


def locate() -> Upstream:
    """The upstream files, from the first place that has them all, each matching its pinned sha256;
    UpstreamUnavailable otherwise."""
    named = os.environ.get("DYNAMO_LAB_UPSTREAM_DIR")
    if named:
        if not _complete(Path(named)):
            raise UpstreamUnavailable(f"DYNAMO_LAB_UPSTREAM_DIR={named} lacks some of {', '.join(FILES)}")
        return _verified(Path(named), "put the pinned files there, or unset DYNAMO_LAB_UPSTREAM_DIR")
    cache = cache_dir()
    if not _complete(cache):
        _download(cache, os.environ.get("DYNAMO_LAB_UPSTREAM_URL", REPOSITORY))
    return _verified(cache, f"delete {cache} to download it again")

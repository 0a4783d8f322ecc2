"""One local cluster's directory: where each of its files is (`StateDir`), the admin credentials and
kubeconfigs written there, readable by their owner only, and the plan (`Startup`: what the inner
starts, written before it starts and read by it). `prepare` makes a new cluster's directory.

Standard library only.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import subprocess
from pathlib import Path
from typing import Mapping, Optional

from dynamo_lab.local_cluster.api import LocalClusterError
from dynamo_lab.local_cluster.nodes import LAB_CLUSTER, lab_nodes
from dynamo_lab.local_cluster.root_paths import Refused, make_dirs, trusted_uid
from dynamo_lab.local_cluster.tools import KWOK_STAGES, kwok_stages

ETCD_PORT, APISERVER_PORT = 2379, 6443       # inside the namespace: nothing else is there
# The local cluster's kubeconfig context (and cluster) name: what a local run sets a stack's
# kubernetes:context to (stack_overrides.local_overrides).
CONTEXT = "dynamo-lab"


@dataclasses.dataclass(frozen=True)
class StateDir:
    """Where one cluster keeps its files (all under `path`)."""
    path: Path

    @property
    def pki(self) -> Path:
        return self.path / "pki"

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    @property
    def socket(self) -> Path:
        return self.path / "apiserver.sock"

    @property
    def inner_kubeconfig(self) -> Path:
        return self.path / "kubeconfig.inner"

    @property
    def kubeconfig(self) -> Path:
        return self.path / "kubeconfig"

    @property
    def status(self) -> Path:
        return self.path / "status.json"

    @property
    def plan(self) -> Path:
        return self.path / "plan.json"

    @property
    def apiserver_outage(self) -> Path:
        """Written (seconds) to stop the API server that long; the inner removes it once it is back."""
        return self.path / "apiserver-outage"

    @property
    def apiserver_outage_end(self) -> Path:
        """Written to end the outage before its seconds are up; the inner removes it with the outage's."""
        return self.path / "apiserver-outage-end"

    @property
    def kwok_stages(self) -> Path:
        return self.path / "kwok-stages.yaml"

    @property
    def ca(self) -> Path:
        return self.pki / "apiserver.crt"      # the apiserver's self-signed certificate (with its CA)


def write_private(path: Path, text: str) -> None:
    """Write `path` readable and writable by its owner only (0600), whatever the umask: the admin
    token is in the kubeconfigs, tokens.csv and the plan, and sa.key signs service account tokens.
    An existing file is made 0600 before its content is replaced."""
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(text)


def kubeconfig(server: str, ca: Path, token: str) -> dict:
    return {"apiVersion": "v1", "kind": "Config", "current-context": CONTEXT,
            "clusters": [{"name": CONTEXT, "cluster": {"server": server, "certificate-authority": str(ca)}}],
            "users": [{"name": "admin", "user": {"token": token}}],
            "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": "admin"}}]}


@dataclasses.dataclass(frozen=True)
class Startup:
    """What the inner starts: the admin token, each tool's bin directory, kwok's Stage file (None:
    no kwok, so no nodes), the nodes it simulates, and the CRDs to apply once the cluster is up."""
    token: str
    bins: dict[str, str]
    kwok_stages: Optional[str]
    nodes: list[dict]
    crd_dir: Optional[str]

    def write(self, path: Path) -> None:
        write_private(path, json.dumps(dataclasses.asdict(self), indent=2))

    @classmethod
    def read(cls, path: Path) -> "Startup":
        """The plan in `path`; of a cluster started before the plan had these fields (one left
        running across an upgrade), the token, which is all a client of it reads."""
        raw = json.loads(path.read_text())
        return cls(token=raw["token"], bins=raw.get("bins") or {}, kwok_stages=raw.get("kwok_stages"),
                   nodes=raw.get("nodes") or [], crd_dir=raw.get("crd_dir"))


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def prepare(state: Path, bins: Mapping[str, Path], crd_dir: Optional[Path] = None,
            nodes_from: Path = LAB_CLUSTER) -> StateDir:
    """Write the plan, the keys and the kubeconfigs of a new cluster into `state` (made empty)."""
    sd = StateDir(state)
    try:  # as root, never under a link or a directory another user could change (root_paths)
        make_dirs(state, trusted_uid(), mode=0o700)
    except Refused as e:
        raise LocalClusterError(f"not making the cluster's directory {state}: {e}") from None
    if any(state.iterdir()):
        raise LocalClusterError(f"{state} is not empty: a cluster may be up there (`down` it first)")
    # The state directory and pki/ are the owner's only (0700), and so is every file holding the
    # admin token or a key (0600): a cluster-admin credential, whatever the umask.
    state.chmod(0o700)
    sd.pki.mkdir(mode=0o700)
    sd.pki.chmod(0o700)
    sd.logs.mkdir(mode=0o700)
    token = secrets.token_hex(24)
    write_private(sd.pki / "tokens.csv", f'{token},admin,admin,"system:masters"\n')
    old = os.umask(0o077)
    try:
        _openssl("genrsa", "-out", str(sd.pki / "sa.key"), "2048")
        _openssl("rsa", "-in", str(sd.pki / "sa.key"), "-pubout", "-out", str(sd.pki / "sa.pub"))
    finally:
        os.umask(old)
    write_private(sd.inner_kubeconfig, json.dumps(kubeconfig(f"https://127.0.0.1:{APISERVER_PORT}", sd.ca, token)))
    stages = None
    if "kwok" in bins:
        stages = sd.kwok_stages
        source = kwok_stages(bins["kwok"])
        stages.write_text("\n---\n".join((source / s).read_text() for s in KWOK_STAGES))
    Startup(token=token, bins={name: str(path) for name, path in bins.items()},
         kwok_stages=str(stages) if stages else None,
         nodes=lab_nodes(nodes_from.read_text()) if stages else [],
         crd_dir=str(crd_dir) if crd_dir else None).write(sd.plan)
    return sd

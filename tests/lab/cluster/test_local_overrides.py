"""`up STACK --local` and `down STACK --local` (dynamo_lab/local_cluster/local.py) with a stack file that was
made for the lab: initialised there with the real Pulumi CLI under the lab's passphrase (its
`encryptionsalt`, a `secure:` HF token) and naming the lab's cluster (`kubernetes:kubeconfig`,
`kubernetes:context`, `kubernetes:cluster`, and KUBECONFIG in the environment too).

What each part stands for: a trap, a listening socket on 127.0.0.1 that counts every connection, is
the unreachable lab; a second local cluster (the harness's, with its own API server) is a lab that
is reachable and would accept everything. The real engine deploys onto the local cluster only:
the trap sees no connection, the second cluster none of the stack's objects, and the run succeeds
although the workspace cannot decrypt the lab's secrets (it leaves them out, and says so).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import socket
import subprocess
import threading
from pathlib import Path

import pytest
import yaml

from dynamo_lab.local_cluster import harness, local, pulumi_workspace
from tests.helpers import ROOT
from tests.lab.cluster.test_deploy import on_cluster

pytestmark = pytest.mark.cluster

STACK = "cross-server"
LAB_PASSPHRASE = "the lab's own passphrase, not the workspace's"
TOKEN = "hf_labonly" + "q" * 24


class Trap:
    """A TCP listener on 127.0.0.1 that accepts and counts connections, then closes each."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            with contextlib.suppress(socket.timeout, OSError):
                conn, _ = self.sock.accept()
                self.connections += 1
                conn.close()

    def kubeconfig(self, into: Path) -> Path:
        path = into / "lab-kubeconfig.yaml"
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "lab-admin@lab",
            "clusters": [{"name": "lab", "cluster": {"server": f"https://127.0.0.1:{self.port}",
                                                     "insecure-skip-tls-verify": True}}],
            "users": [{"name": "lab-admin", "user": {"token": "lab-token"}}],
            "contexts": [{"name": "lab-admin@lab", "context": {"cluster": "lab", "user": "lab-admin"}}]}))
        return path

    def close(self):
        self._stop.set()
        self._thread.join()
        self.sock.close()


def lab_initialised(project: Path, pulumi: Path, cluster_keys: dict[str, str]) -> Path:
    """The shipped stack file as a user leaves it after the checklist, for the lab: `pulumi stack
    init` and `pulumi config set` by the real CLI, under the lab's passphrase, in `project`."""
    project.mkdir(parents=True)
    (project / "Pulumi.yaml").write_text(yaml.safe_dump({"name": pulumi_workspace.PROJECT, "runtime": "python"}))
    stack_file = project / f"Pulumi.{STACK}.yaml"
    stack_file.write_text((ROOT / f"Pulumi.{STACK}.yaml").read_text())
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(project), "PULUMI_HOME": str(project / ".pulumi-home"),
           "PULUMI_BACKEND_URL": f"file://{project / 'state'}", "PULUMI_CONFIG_PASSPHRASE": LAB_PASSPHRASE,
           "PULUMI_SKIP_UPDATE_CHECK": "true"}
    (project / "state").mkdir()
    cli = str(pulumi / "pulumi")

    def run(*argv):
        subprocess.run([cli, *argv], cwd=project, env=env, check=True, capture_output=True, text=True, timeout=120)

    run("stack", "init", STACK)
    run("config", "set", "--secret", "--stack", STACK, "dynamo-lab:hfToken", TOKEN)
    for key, value in cluster_keys.items():
        run("config", "set", "--stack", STACK, key, value)
    doc = yaml.safe_load(stack_file.read_text())
    assert doc["encryptionsalt"].startswith("v1:") and "secure" in doc["config"]["dynamo-lab:hfToken"]
    assert TOKEN not in stack_file.read_text()
    return stack_file


def renamed(stack_file: Path, cluster_keys: dict[str, str]) -> None:
    """The same file, naming another cluster (the user's next `pulumi config set`)."""
    doc = yaml.safe_load(stack_file.read_text())
    doc["config"].update(cluster_keys)
    stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))


def test_up_and_down_local_reach_only_the_local_cluster_with_a_stack_file_made_for_the_lab(
        cluster_bins, engine_bins, dgd_crd_dir, tmp_path, monkeypatch):
    trap = Trap()
    project = tmp_path / "project"
    state_root = tmp_path / "local"
    monkeypatch.setattr(local, "ROOT", project)  # the stack file up --local deploys: the lab's
    monkeypatch.setattr(local.local_state, "local_root", lambda env=None: state_root)
    lab_kubeconfig = trap.kubeconfig(tmp_path)
    monkeypatch.setenv("KUBECONFIG", str(lab_kubeconfig))  # the lab in the environment too
    stack_file = lab_initialised(project, engine_bins["pulumi"], {
        "kubernetes:kubeconfig": str(lab_kubeconfig), "kubernetes:context": "lab-admin@lab",
        "kubernetes:cluster": "lab"})
    local_state = state_root / "cluster"
    try:
        with harness.running(tmp_path / "second" / "state", cluster_bins) as second:
            other = second.api()
            before = sorted(n["metadata"]["name"] for n in other.call("GET", "/api/v1/namespaces")[1]["items"])

            # 1. The lab unreachable (the trap): up --local deploys onto the local cluster, and says
            #    which keys it set otherwise and which it left out.
            said, out = [], io.StringIO()
            assert local.up(STACK, out=out, log=said.append) == 0, out.getvalue()[-4000:]
            (line,) = [m for m in said if "left out" in m]
            assert "set to the local cluster's: kubernetes:context, kubernetes:kubeconfig" in line, line
            assert "kubernetes:cluster (the local kubeconfig chooses the cluster)" in line, line
            assert "dynamo-lab:hfToken, encryptionsalt (encrypted for another passphrase" in line, line
            assert str(lab_kubeconfig) not in line and "v1:" not in line
            mine = harness.attach(local_state).api()
            assert set(on_cluster(mine, STACK).values()) == {200}, on_cluster(mine, STACK)
            assert trap.connections == 0, f"{trap.connections} connection(s) reached the lab's address"
            written = yaml.safe_load((state_root / "stacks" / STACK / "project" / f"Pulumi.{STACK}.yaml").read_text())
            assert written["config"]["kubernetes:kubeconfig"] == str(local_state.absolute() / "kubeconfig")
            assert written["encryptionsalt"] != yaml.safe_load(stack_file.read_text())["encryptionsalt"]
            assert TOKEN not in out.getvalue() and "hfToken" not in json.dumps(written["config"])

            # 2. The lab reachable (a second cluster, named by the stack file and KUBECONFIG): up
            #    --local changes nothing on the local cluster and creates nothing on the other.
            renamed(stack_file, {"kubernetes:kubeconfig": str(second.kubeconfig), "kubernetes:context": "dynamo-lab"})
            monkeypatch.setenv("KUBECONFIG", str(second.kubeconfig))
            said, out = [], io.StringIO()
            assert local.up(STACK, out=out, log=said.append) == 0, out.getvalue()[-4000:]
            assert "kubernetes:kubeconfig" in next(m for m in said if "set to the local cluster's" in m)
            assert re.search(r"^\s+\d+ unchanged$", out.getvalue(), flags=re.M), out.getvalue()[-3000:]
            assert not re.search(r"to create|created|to update|updated|to replace|replaced", out.getvalue())
            assert set(on_cluster(mine, STACK).values()) == {200}
            assert set(on_cluster(other, STACK).values()) == {404}, on_cluster(other, STACK)

            # 3. down --local destroys there, and the cluster stops (no other local stack).
            said, out = [], io.StringIO()
            assert local.down(STACK, out=out, log=said.append) == 0, out.getvalue()[-4000:]
            assert any("cluster stopped" in m for m in said), said
            assert set(on_cluster(other, STACK).values()) == {404}
            after = sorted(n["metadata"]["name"] for n in other.call("GET", "/api/v1/namespaces")[1]["items"])
            assert after == before
        assert trap.connections == 0, f"{trap.connections} connection(s) reached the lab's address"
        assert harness.leftovers(local_state) == []
        assert not (state_root / "stacks" / STACK).exists()
    finally:
        trap.close()
        if harness.status_of(local_state).to_json():
            harness.stop(local_state)

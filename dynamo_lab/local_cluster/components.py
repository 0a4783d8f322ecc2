"""The local control plane's components, one type each, as envtest has them: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and kwok (the lab's GPU nodes, simulated). Each knows its
command line (every address loopback), how to tell it is ready, and how to start and stop its one
process; `lab_components` lists them in start order for a plan. The control plane that starts and
stops them together is control_plane.py's.

Standard library only.
"""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path
from typing import ClassVar, Optional

from dynamo_lab.local_cluster.api import Api, LocalClusterError, http_ok, wait_until
from dynamo_lab.local_cluster.nodes import KWOK_ANNOTATION
from dynamo_lab.local_cluster.root_paths import Binary, Refused, open_binary, trusted_uid
from dynamo_lab.local_cluster.state import APISERVER_PORT, ETCD_PORT, Startup, StateDir

# What kwok v0.8.0 prints when its start-up race kills it (see Kwok.start).
KWOK_START_RACE = "fatal error: concurrent map writes"


def end(p: subprocess.Popen, grace: float) -> None:
    """Stop a process: SIGTERM, then SIGKILL if it is still running after `grace` seconds."""
    with contextlib.suppress(OSError):
        p.terminate()
    try:
        p.wait(grace)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


class ControlPlaneProcess:
    """One process of the control plane: started, waited for until `ready()`, stopped."""
    name: ClassVar[str]
    ready_timeout: ClassVar[float] = 120.0
    stop_grace: ClassVar[float] = 10.0

    def __init__(self, state: StateDir, bin_dir: Path, api: Api):
        self.state, self.bin_dir, self.api = state, bin_dir, api
        self.process: Optional[subprocess.Popen] = None
        self.binary: Optional[Binary] = None    # the file its process runs, open while it runs

    @property
    def log(self) -> Path:
        return self.state.logs / f"{self.name}.log"

    def argv(self) -> list[str]:
        raise NotImplementedError

    def ready(self) -> bool:
        """One look: is it serving yet? (An OSError, LocalClusterError or ValueError counts as not yet.)"""
        return True

    def start(self, what: Optional[str] = None) -> None:
        """Start its process (its output appended to its log) and wait until it is ready; a
        LocalClusterError, naming `what` (by default its name), if it exits first or is not ready in time.
        Its binary is checked as the tools' check holds it (root_paths.open_binary: from / down, and its
        sha256 against its cache entry's stamp) when it starts, minutes after cluster-tools decided
        on it, and the open file is what runs: a binary swapped in between is refused or not run."""
        argv = self.argv()
        self._close_binary()
        try:
            self.binary = open_binary(Path(argv[0]), trusted_uid())
        except Refused as e:
            raise LocalClusterError(f"{what or self.name}: not started: {e}") from None
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(argv, executable=self.binary.exec_path, stdin=subprocess.DEVNULL,
                                            stdout=out, stderr=subprocess.STDOUT)
        wait_until(what or self.name, self.ready, self.ready_timeout, self.process, self.log)

    def _close_binary(self) -> None:
        # Open until its process ends: a script's interpreter opens the file by that path after the exec.
        if self.binary is not None:
            self.binary.close()
            self.binary = None

    def stop(self, grace: Optional[float] = None) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds; nothing when it was never started."""
        if self.process is not None:
            end(self.process, self.stop_grace if grace is None else grace)
        self._close_binary()

    def exited(self) -> Optional[int]:
        """Its exit code once its process has ended (None: running, or never started)."""
        return None if self.process is None else self.process.poll()


class Etcd(ControlPlaneProcess):
    name = "etcd"

    def argv(self) -> list[str]:
        return [str(self.bin_dir / "etcd"), "--name=lab", f"--data-dir={self.state.path / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{ETCD_PORT}",
                f"--advertise-client-urls=http://127.0.0.1:{ETCD_PORT}",
                "--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
                "--initial-cluster=lab=http://127.0.0.1:2380", "--listen-metrics-urls=http://127.0.0.1:2381",
                "--unsafe-no-fsync", "--max-request-bytes=33554432", "--quota-backend-bytes=4294967296",
                "--log-level=warn"]

    def ready(self) -> bool:
        return http_ok(f"http://127.0.0.1:{ETCD_PORT}/health")


class KubeApiserver(ControlPlaneProcess):
    name = "kube-apiserver"

    def argv(self) -> list[str]:
        pki = self.state.pki
        return [str(self.bin_dir / "kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{ETCD_PORT}",
                "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
                f"--secure-port={APISERVER_PORT}", f"--cert-dir={pki}",
                f"--token-auth-file={pki / 'tokens.csv'}", "--authorization-mode=RBAC",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--service-cluster-ip-range=10.96.0.0/16", "--allow-privileged=true",
                "--v=1"]

    def ready(self) -> bool:
        return self.api.call("GET", "/readyz", timeout=3)[0] == 200


class KubeControllerManager(ControlPlaneProcess):
    name = "kube-controller-manager"

    def argv(self) -> list[str]:
        kcfg = str(self.state.inner_kubeconfig)
        return [str(self.bin_dir / "kube-controller-manager"), f"--kubeconfig={kcfg}",
                "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=10257",
                f"--authentication-kubeconfig={kcfg}", f"--authorization-kubeconfig={kcfg}",
                f"--service-account-private-key-file={self.state.pki / 'sa.key'}",
                f"--root-ca-file={self.state.ca}", "--use-service-account-credentials=false",
                "--controllers=*,-csrsigning,-csrapproving,-nodeipam", "--v=1"]

    def ready(self) -> bool:
        # Its service account controller has made the default namespace's account.
        return self.api.call("GET", "/api/v1/namespaces/default/serviceaccounts/default", timeout=3)[0] == 200


class KubeScheduler(ControlPlaneProcess):
    name = "kube-scheduler"

    def argv(self) -> list[str]:
        kcfg = str(self.state.inner_kubeconfig)
        return [str(self.bin_dir / "kube-scheduler"), f"--kubeconfig={kcfg}", "--leader-elect=false",
                "--bind-address=127.0.0.1", "--secure-port=10259",
                f"--authentication-kubeconfig={kcfg}", f"--authorization-kubeconfig={kcfg}", "--v=1"]


class Kwok(ControlPlaneProcess):
    """kwok managing the plan's nodes (those annotated for it): it is ready when each is Ready."""
    name = "kwok"
    ready_timeout = 90.0
    RETRIED = b"\n--- dynamo-lab: kwok died at start (its start race); starting it again ---\n"

    def __init__(self, state: StateDir, bin_dir: Path, api: Api, stages: Path, nodes: list[dict]):
        super().__init__(state, bin_dir, api)
        self.stages, self.nodes = stages, nodes

    def argv(self) -> list[str]:
        return [str(self.bin_dir / "kwok"), f"--kubeconfig={self.state.inner_kubeconfig}", "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
                "--node-ip=127.0.0.1", "--cidr=127.8.0.0/16", "--server-address=127.0.0.1:10247",
                f"--config={self.stages}", "--v=INFO"]

    def ready(self) -> bool:
        for node in self.nodes:
            code, body = self.api.call("GET", f"/api/v1/nodes/{node['metadata']['name']}", timeout=3)
            conds = body.get("status", {}).get("conditions", []) if code == 200 else []
            if not any(c["type"] == "Ready" and c["status"] == "True" for c in conds):
                return False
        return True

    def start(self, what: Optional[str] = None) -> None:
        """The nodes created, then kwok started until they are Ready. kwok v0.8.0 can die at start
        with "fatal error: concurrent map writes" (a race in its CEL registry,
        github.com/wzshiming/easycel registry.go, seen here once in about ten starts): it is started
        once more, only for that crash."""
        for node in self.nodes:
            self.api.create("/api/v1/nodes", node)
        try:
            super().start(what or "kwok nodes Ready")
        except LocalClusterError:
            if self.exited() is None or KWOK_START_RACE not in self.log.read_text(errors="replace"):
                raise
            with open(self.log, "ab") as out:
                out.write(self.RETRIED)
            super().start(what or "kwok nodes Ready")


def lab_components(state: StateDir, plan: Startup, api: Api) -> list[ControlPlaneProcess]:
    """The plan's components in start order: kwok last, and only when the plan has its stages."""
    bins = {name: Path(path) for name, path in plan.bins.items()}
    k8s = bins["kubernetes"]
    out: list[ControlPlaneProcess] = [Etcd(state, bins["etcd"], api), KubeApiserver(state, k8s, api),
                            KubeControllerManager(state, k8s, api), KubeScheduler(state, k8s, api)]
    if plan.kwok_stages is not None:
        out.append(Kwok(state, bins["kwok"], api, Path(plan.kwok_stages), plan.nodes))
    return out

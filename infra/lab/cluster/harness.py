"""A local lab cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (the
lab's two GPU nodes, simulated) in a network namespace of their own, where only loopback exists.

Three processes deep, so that every path tears everything down:

  outer (this module, `serve`)     in the caller's network namespace; listens on 127.0.0.1:PORT
   |                                and forwards each connection to the apiserver's Unix socket
   `- unshare --net --pid --fork --kill-child       (dies with the outer: PR_SET_PDEATHSIG)
       `- inner (this module, `inner`)              PID 1 of a new PID namespace, in a new network
            |                                        namespace: brings loopback up, starts the
            `- etcd, kube-apiserver, ...             components, serves the Unix socket

When the inner ends, however it ends, the kernel kills every process of its PID namespace, and the
network namespace goes with its last process: nothing to delete by hand. The inner stops when its
stdin (a pipe from the outer) closes, on SIGTERM, or when `unshare` dies (--kill-child); the outer
stops on SIGTERM/SIGINT/SIGHUP (`down`) and dies with its parent when it was started attached (the
pytest fixture), so even a killed test run leaves nothing behind.

Standard library only, but for PyYAML when CRD files are applied.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import os
import re
import secrets
import selectors
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

from infra.lab.cluster.tools import KWOK_STAGES, kwok_stages

ROOT = Path(__file__).resolve().parents[3]
LAB_CLUSTER = ROOT / "tests" / "data" / "preflight" / "lab.json"
ETCD_PORT, APISERVER_PORT = 2379, 6443       # inside the namespace: nothing else is there
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
PR_SET_PDEATHSIG = 1
# What kwok v0.8.0 prints when its start-up race kills it (see inner()).
KWOK_START_RACE = "fatal error: concurrent map writes"


class ClusterError(RuntimeError):
    pass


# ---- pure parts: what is started, with which flags, and the nodes ----

@dataclasses.dataclass(frozen=True)
class Layout:
    """Where one cluster keeps its files (all under `state`)."""
    state: Path

    @property
    def pki(self) -> Path:
        return self.state / "pki"

    @property
    def logs(self) -> Path:
        return self.state / "logs"

    @property
    def socket(self) -> Path:
        return self.state / "apiserver.sock"

    @property
    def inner_kubeconfig(self) -> Path:
        return self.state / "kubeconfig.inner"

    @property
    def kubeconfig(self) -> Path:
        return self.state / "kubeconfig"

    @property
    def status(self) -> Path:
        return self.state / "status.json"

    @property
    def plan(self) -> Path:
        return self.state / "plan.json"

    @property
    def apiserver_outage(self) -> Path:
        """Written (seconds) to stop the API server that long; the inner removes it once it is back."""
        return self.state / "apiserver-outage"

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


# The local cluster's kubeconfig context (and cluster) name: what a local run sets a stack's
# kubernetes:context to (engine.local_overrides).
CONTEXT = "dynamo-lab"


def kubeconfig(server: str, ca: Path, token: str) -> dict:
    return {"apiVersion": "v1", "kind": "Config", "current-context": CONTEXT,
            "clusters": [{"name": CONTEXT, "cluster": {"server": server, "certificate-authority": str(ca)}}],
            "users": [{"name": "admin", "user": {"token": token}}],
            "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": "admin"}}]}


def commands(bins: Mapping[str, Path], lay: Layout, stages: Optional[Path]) -> list[tuple[str, list[str]]]:
    """The components in start order, each (name, argv). Every address is loopback."""
    pki, kcfg = lay.pki, str(lay.inner_kubeconfig)
    k8s = bins["kubernetes"]
    out = [
        ("etcd", [str(bins["etcd"] / "etcd"), "--name=lab", f"--data-dir={lay.state / 'etcd'}",
                  f"--listen-client-urls=http://127.0.0.1:{ETCD_PORT}",
                  f"--advertise-client-urls=http://127.0.0.1:{ETCD_PORT}",
                  "--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
                  "--initial-cluster=lab=http://127.0.0.1:2380", "--listen-metrics-urls=http://127.0.0.1:2381",
                  "--unsafe-no-fsync", "--max-request-bytes=33554432", "--quota-backend-bytes=4294967296",
                  "--log-level=warn"]),
        ("kube-apiserver", [str(k8s / "kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{ETCD_PORT}",
                            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
                            f"--secure-port={APISERVER_PORT}", f"--cert-dir={pki}",
                            f"--token-auth-file={pki / 'tokens.csv'}", "--authorization-mode=RBAC",
                            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                            f"--service-account-key-file={pki / 'sa.pub'}",
                            f"--service-account-signing-key-file={pki / 'sa.key'}",
                            "--service-cluster-ip-range=10.96.0.0/16", "--allow-privileged=true",
                            "--v=1"]),
        ("kube-controller-manager", [str(k8s / "kube-controller-manager"), f"--kubeconfig={kcfg}",
                                     "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=10257",
                                     f"--authentication-kubeconfig={kcfg}", f"--authorization-kubeconfig={kcfg}",
                                     f"--service-account-private-key-file={pki / 'sa.key'}",
                                     f"--root-ca-file={lay.ca}", "--use-service-account-credentials=false",
                                     "--controllers=*,-csrsigning,-csrapproving,-nodeipam", "--v=1"]),
        ("kube-scheduler", [str(k8s / "kube-scheduler"), f"--kubeconfig={kcfg}", "--leader-elect=false",
                            "--bind-address=127.0.0.1", "--secure-port=10259",
                            f"--authentication-kubeconfig={kcfg}", f"--authorization-kubeconfig={kcfg}", "--v=1"]),
    ]
    if stages is not None:
        out.append(("kwok", [str(bins["kwok"] / "kwok"), f"--kubeconfig={kcfg}", "--manage-all-nodes=false",
                             f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
                             "--node-ip=127.0.0.1", "--cidr=127.8.0.0/16", "--server-address=127.0.0.1:10247",
                             f"--config={stages}", "--v=INFO"]))
    return out


def _documents(text: str) -> list[Any]:
    """The JSON documents of a saved `kubectl version -o json; kubectl get ... -o json` file."""
    decoder, at, docs = json.JSONDecoder(), 0, []
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            return docs
        doc, at = decoder.raw_decode(text, at)
        docs.append(doc)


def lab_nodes(text: str) -> list[dict]:
    """The lab's Nodes as kwok nodes: the same names, labels, capacity, allocatable (GPU replicas
    and GPU feature discovery labels included) and node info; no addresses (kwok gives loopback),
    no conditions (kwok's node-initialize stage sets them), annotated for kwok to manage."""
    nodes = []
    for doc in _documents(text):
        for item in doc.get("items", []) if isinstance(doc, dict) else []:
            if item.get("kind") != "Node":
                continue
            meta, status = item["metadata"], item.get("status", {})
            nodes.append({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": meta["name"], "labels": dict(meta.get("labels", {})),
                             "annotations": {KWOK_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"}},
                "spec": {"taints": list(item.get("spec", {}).get("taints", []))},
                "status": {"capacity": dict(status.get("capacity", {})),
                           "allocatable": dict(status.get("allocatable", {})),
                           "nodeInfo": dict(status.get("nodeInfo", {}))},
            })
    return nodes




# ---- talking to the apiserver (inside the namespace, or through the outer's port) ----

# The query that makes the API server refuse a field it does not know (a misspelling, a field of
# another version) instead of dropping it with a warning, its default ("Warn").
STRICT = "fieldValidation=Strict"
_WARNING = re.compile(r'^\s*\d{3}\s+\S+\s+"((?:[^"\\]|\\.)*)"')


def warning_texts(values: Sequence[str]) -> list[str]:
    """The texts of `Warning` response headers (RFC 7234: `299 - "text"`, quotes escaped)."""
    out = []
    for value in values:
        m = _WARNING.match(value)
        out.append(re.sub(r"\\(.)", r"\1", m.group(1)) if m else value.strip())
    return out


class Api:
    def __init__(self, server: str, token: str, ca: Optional[Path]):
        self.server, self.token, self.ca = server.rstrip("/"), token, ca
        self._ctx: Optional[ssl.SSLContext] = None
        # The API server's warnings: of the last call, and of every call, each "METHOD PATH: text".
        self.last_warnings: list[str] = []
        self.warnings: list[str] = []

    @property
    def ctx(self) -> ssl.SSLContext:
        """Made on first use: the apiserver writes its certificate when it starts."""
        if self._ctx is None:
            self._ctx = ssl.create_default_context(cafile=str(self.ca))
        return self._ctx

    def call(self, method: str, path: str, body: Any = None, timeout: float = 30,
             content_type: str = "application/json") -> tuple[int, Any]:
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(self.server + path, data=data, method=method,
                                     headers={"Authorization": f"Bearer {self.token}", "Content-Type": content_type,
                                              "Accept": "application/json"})
        self.last_warnings = []
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=timeout) as r:
                self._warned(method, path, r.headers)
                raw = r.read()
                return r.status, (json.loads(raw) if raw[:1] in (b"{", b"[") else raw.decode())
        except urllib.error.HTTPError as e:
            self._warned(method, path, e.headers)
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, raw.decode(errors="replace")

    def _warned(self, method: str, path: str, headers) -> None:
        texts = warning_texts(headers.get_all("Warning") or []) if headers is not None else []
        self.last_warnings = [f"{method} {path}: {t}" for t in texts]
        self.warnings.extend(self.last_warnings)

    def create(self, collection: str, obj: dict) -> int:
        """POST `obj`, every field checked (fieldValidation=Strict); 409 (it exists) is not an error."""
        code, body = self.call("POST", f"{collection}?{STRICT}", obj)
        if code not in (200, 201, 409):
            raise ClusterError(f"POST {collection} {obj['metadata']['name']}: {code} {body}")
        return code


def _wait(what: str, check, timeout: float, proc: Optional[subprocess.Popen] = None, log: Optional[Path] = None):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text()[-3000:] if log and log.exists() else ""
            raise ClusterError(f"{what}: exited with {proc.returncode} before it was ready:\n{tail}")
        try:
            if check():
                return
        except (OSError, ClusterError, ValueError) as e:
            last = e
        time.sleep(0.25)
    raise ClusterError(f"{what}: not ready after {timeout:.0f} s ({last})")


def _http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as r:
        return r.status == 200


# ---- the inner: PID 1 of the namespaces ----

def _forward(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until either side closes."""
    sel = selectors.DefaultSelector()
    sel.register(a, selectors.EVENT_READ, b)
    sel.register(b, selectors.EVENT_READ, a)
    try:
        while True:
            for key, _ in sel.select():
                data = key.fileobj.recv(65536)
                if not data:
                    return
                key.data.sendall(data)
    except OSError:
        return
    finally:
        sel.close()
        a.close()
        b.close()


def _serve(listener: socket.socket, connect) -> None:
    def loop():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = connect()
            except OSError:
                conn.close()
                continue
            threading.Thread(target=_forward, args=(conn, upstream), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()


def _write_status(lay: Layout, **fields) -> None:
    status = {}
    with contextlib.suppress(OSError, ValueError):
        status = json.loads(lay.status.read_text())
    status.update(fields)
    tmp = lay.status.with_suffix(".tmp")
    tmp.write_text(json.dumps(status, indent=2) + "\n")
    tmp.replace(lay.status)


def _apply_crds(api: Api, crd_dir: Path) -> list[str]:
    import yaml  # PyYAML: the CRDs are YAML files

    names = []
    for path in sorted(crd_dir.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                api.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
                names.append(doc["metadata"]["name"])
    for name in names:
        def established(name=name):
            code, body = api.call("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            return code == 200 and any(c["type"] == "Established" and c["status"] == "True"
                                       # conditions is null until the controller first writes it
                                       for c in (body.get("status") or {}).get("conditions") or [])
        _wait(f"CRD {name}", established, 60)
    return names


def inner(state: Path) -> int:
    # What etcd and the apiserver write (its serving key in pki/, etcd's data) is the owner's only.
    os.umask(0o077)
    lay = Layout(state)
    plan = json.loads(lay.plan.read_text())
    procs: list[tuple[str, subprocess.Popen]] = []
    stopping = threading.Event()

    def on_signal(signum, frame):
        stopping.set()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    # The outer holds our stdin: EOF means stop (the outer ended or asked us to).
    def watch_stdin():
        with contextlib.suppress(OSError):
            while os.read(0, 4096):
                pass
        stopping.set()
    threading.Thread(target=watch_stdin, daemon=True).start()
    # PID 1 of a PID namespace reaps every orphan; subprocess reaps our own children.
    try:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True, capture_output=True)
        addrs = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        if any(not line.split(":")[1].strip().startswith("lo") for line in links.splitlines() if line.strip()):
            raise ClusterError(f"the namespace has links besides loopback:\n{links}")
        _write_status(lay, inner_pid_host_view=os.getpid(), addresses=addrs.split("\n"))
        api = Api(f"https://127.0.0.1:{APISERVER_PORT}", plan["token"], lay.ca)
        lay.logs.mkdir(parents=True, exist_ok=True)
        ready_checks = {
            "etcd": lambda: _http_ok(f"http://127.0.0.1:{ETCD_PORT}/health"),
            "kube-apiserver": lambda: api.call("GET", "/readyz", timeout=3)[0] == 200,
            "kube-controller-manager": lambda: api.call("GET", "/api/v1/namespaces/default/serviceaccounts/default",
                                                        timeout=3)[0] == 200,
            "kube-scheduler": lambda: True,
        }
        for name, argv in plan["commands"]:
            if stopping.is_set():
                raise ClusterError("stopped while starting")
            if name == "kwok":
                for node in plan["nodes"]:
                    api.create("/api/v1/nodes", node)
            t0 = time.monotonic()
            log = lay.logs / f"{name}.log"
            with open(log, "ab") as out:
                p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
            procs.append((name, p))
            if name == "kube-apiserver":
                _serve_socket(lay)
            if name == "kwok":
                def nodes_ready():
                    for node in plan["nodes"]:
                        code, body = api.call("GET", f"/api/v1/nodes/{node['metadata']['name']}", timeout=3)
                        conds = body.get("status", {}).get("conditions", []) if code == 200 else []
                        if not any(c["type"] == "Ready" and c["status"] == "True" for c in conds):
                            return False
                    return True
                try:
                    _wait("kwok nodes Ready", nodes_ready, 90, p, log)
                except ClusterError:
                    # kwok v0.8.0 can die at start with "fatal error: concurrent map writes" (a
                    # race in its CEL registry, github.com/wzshiming/easycel registry.go, seen
                    # here once in about ten starts): start it once more, only for that crash.
                    if p.poll() is None or KWOK_START_RACE not in log.read_text(errors="replace"):
                        raise
                    with open(log, "ab") as out:
                        out.write(b"\n--- dynamo-lab: kwok died at start (its start race); starting it again ---\n")
                        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
                    procs[-1] = (name, p)
                    _wait("kwok nodes Ready", nodes_ready, 90, p, log)
            else:
                _wait(name, ready_checks[name], 120, p, log)
            _write_status(lay, **{f"ready_{name}_s": round(time.monotonic() - t0, 1)})
        crds = _apply_crds(api, Path(plan["crd_dir"])) if plan.get("crd_dir") else []
        _write_status(lay, ready=True, crds=crds, pids={n: p.pid for n, p in procs})
        while not stopping.wait(0.5):
            if lay.apiserver_outage.exists():
                procs = _apiserver_outage(lay, procs, plan, ready_checks["kube-apiserver"])
            for name, p in procs:
                if p.poll() is not None:
                    raise ClusterError(f"{name} exited with {p.returncode}")
        return 0
    except ClusterError as e:
        _write_status(lay, error=str(e))
        return 1
    except Exception as e:  # noqa: BLE001 - reported to the outer, then everything stops
        _write_status(lay, error=f"{type(e).__name__}: {e}")
        return 1
    finally:
        # In reverse order, clients before the apiserver, the apiserver before etcd.
        for name, p in reversed(procs):
            t0 = time.monotonic()
            _end(p, 10)
            with contextlib.suppress(OSError):
                _write_status(lay, **{f"stop_{name}_s": round(time.monotonic() - t0, 1)})
        # Leaving PID 1 kills whatever is left in the PID namespace.


def _end(p: subprocess.Popen, grace: float) -> None:
    """Stop a component: SIGTERM, then SIGKILL if it is still running after `grace` seconds."""
    with contextlib.suppress(OSError):
        p.terminate()
    try:
        p.wait(grace)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def _apiserver_outage(lay: Layout, procs, plan: dict, ready) -> list:
    """Stop the API server for the seconds the request file names, then start it again as it was
    started (a fault test: what a client sees when the API server goes away during its work)."""
    seconds = float(lay.apiserver_outage.read_text().strip() or 10)
    argv = dict(plan["commands"])["kube-apiserver"]
    (i, (name, old)), = [(i, np) for i, np in enumerate(procs) if np[0] == "kube-apiserver"]
    _end(old, 20)
    _write_status(lay, apiserver="stopped", apiserver_stopped_at=time.time())
    time.sleep(seconds)
    with open(lay.logs / "kube-apiserver.log", "ab") as out:
        new = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    _wait("kube-apiserver (restarted)", ready, 120, new, lay.logs / "kube-apiserver.log")
    lay.apiserver_outage.unlink()
    _write_status(lay, apiserver="running", apiserver_restarted_at=time.time())
    return procs[:i] + [(name, new)] + procs[i + 1:]


def _serve_socket(lay: Layout) -> None:
    with contextlib.suppress(FileNotFoundError):
        lay.socket.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(lay.socket))
    lay.socket.chmod(0o600)
    listener.listen(64)
    _serve(listener, lambda: socket.create_connection(("127.0.0.1", APISERVER_PORT), timeout=10))


# ---- the outer: in the caller's namespace ----

def _pdeathsig() -> None:
    """In the child, before exec: SIGKILL when the parent ends."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def prepare(state: Path, bins: Mapping[str, Path], crd_dir: Optional[Path] = None,
            nodes_from: Path = LAB_CLUSTER) -> Layout:
    """Write the plan, the keys and the kubeconfigs of a new cluster into `state` (made empty)."""
    lay = Layout(state)
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    if any(state.iterdir()):
        raise ClusterError(f"{state} is not empty: a cluster may be up there (`down` it first)")
    # The state directory and pki/ are the owner's only (0700), and so is every file holding the
    # admin token or a key (0600): a cluster-admin credential, whatever the umask.
    state.chmod(0o700)
    lay.pki.mkdir(mode=0o700)
    lay.pki.chmod(0o700)
    lay.logs.mkdir(mode=0o700)
    token = secrets.token_hex(24)
    write_private(lay.pki / "tokens.csv", f'{token},admin,admin,"system:masters"\n')
    old = os.umask(0o077)
    try:
        _openssl("genrsa", "-out", str(lay.pki / "sa.key"), "2048")
        _openssl("rsa", "-in", str(lay.pki / "sa.key"), "-pubout", "-out", str(lay.pki / "sa.pub"))
    finally:
        os.umask(old)
    write_private(lay.inner_kubeconfig,
                  json.dumps(kubeconfig(f"https://127.0.0.1:{APISERVER_PORT}", lay.ca, token)))
    stages = None
    if "kwok" in bins:
        stages = lay.state / "kwok-stages.yaml"
        source = kwok_stages(bins["kwok"])
        stages.write_text("\n---\n".join((source / s).read_text() for s in KWOK_STAGES))
    plan = {"token": token, "commands": commands(bins, lay, stages),
            "nodes": lab_nodes(nodes_from.read_text()) if stages else [],
            "crd_dir": str(crd_dir) if crd_dir else None}
    write_private(lay.plan, json.dumps(plan, indent=2))
    return lay


def serve(state: Path, port: int, attached: bool) -> int:
    """The outer: start the inner in its namespaces, forward 127.0.0.1:port to it, wait for a signal."""
    lay = Layout(state)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    port = listener.getsockname()[1]
    plan = json.loads(lay.plan.read_text())
    write_private(lay.kubeconfig, json.dumps(kubeconfig(f"https://127.0.0.1:{port}", lay.ca, plan["token"])))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(lay.logs / "inner.log", "ab") as log:
        child = subprocess.Popen(
            ["unshare", "--net", "--pid", "--fork", "--kill-child", sys.executable, "-m",
             "infra.lab.cluster.harness", "inner", str(state)],
            stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
            preexec_fn=_pdeathsig)
    _write_status(lay, outer_pid=os.getpid(), unshare_pid=child.pid, port=port, attached=attached)
    _serve(listener, lambda: _unix(lay.socket))
    try:
        while not stop.wait(0.5):
            if child.poll() is not None:
                break
    finally:
        listener.close()
        with contextlib.suppress(OSError):
            child.stdin.close()          # the inner's signal to stop
        try:
            child.wait(30)
        except subprocess.TimeoutExpired:
            child.kill()                 # --kill-child: the inner, and so its PID namespace, goes too
            child.wait()
        _write_status(lay, stopped=True, exit=child.returncode)
    return 0 if child.returncode == 0 else 1


def _unix(path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(path))
    return s


# ---- up / down: what the CLI and the pytest fixture call ----

@dataclasses.dataclass
class Handle:
    layout: Layout
    process: Optional[subprocess.Popen]   # the outer, when we started it
    status: dict

    @property
    def kubeconfig(self) -> Path:
        return self.layout.kubeconfig

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.status['port']}"

    def api(self) -> Api:
        return Api(self.server, json.loads(self.layout.plan.read_text())["token"], self.layout.ca)

    def stop_apiserver(self, seconds: float) -> None:
        """Stop the API server for `seconds`, then start it again (returns at once; see
        `apiserver_back`)."""
        self.layout.apiserver_outage.write_text(f"{seconds}\n")

    def apiserver_back(self) -> bool:
        return not self.layout.apiserver_outage.exists() and status_of(self.layout.state).get("apiserver") == "running"


def status_of(state: Path) -> dict:
    try:
        return json.loads(Layout(state).status.read_text())
    except (OSError, ValueError):
        return {}


def up(state: Path, bins: Mapping[str, Path], crd_dir: Optional[Path] = None, attached: bool = True,
       timeout: float = 300, log=print) -> Handle:
    """Start a cluster and wait until it is ready (its nodes Ready, its CRDs established).

    attached: the cluster dies with this process (the pytest fixture); otherwise it outlives it
    (`dynamo-lab cluster up`) until `down`.
    """
    state = state.absolute()
    lay = prepare(state, bins, crd_dir)
    argv = [sys.executable, "-m", "infra.lab.cluster.harness", "serve", str(state), "0"]
    if attached:
        argv.append("--attached")
    with open(lay.logs / "outer.log", "ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                                preexec_fn=_pdeathsig if attached else None, start_new_session=not attached)
    t0 = time.monotonic()
    try:
        def ready():
            s = status_of(state)
            if s.get("error"):
                raise ClusterError(s["error"])
            if proc.poll() is not None:
                raise ClusterError(f"the harness exited ({proc.returncode}); logs in {lay.logs}")
            return bool(s.get("ready"))
        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > deadline:
                raise ClusterError(f"not ready after {timeout:.0f} s; logs in {lay.logs}")
            time.sleep(0.3)
    except BaseException:
        stop(state, proc)
        raise
    s = status_of(state)
    log(f"cluster up in {time.monotonic() - t0:.1f} s: {lay.kubeconfig} ({s.get('port')}); "
        + ", ".join(f"{k[6:-2]} {v} s" for k, v in s.items() if k.startswith("ready_") and k.endswith("_s")))
    return Handle(lay, proc, s)


def _alive(pid: Optional[int]) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
            return False
    return True


def _ours(pid: Optional[int], state: Path) -> bool:
    """Alive and one of this cluster's (it names `state`): a pid in an old status file may be reused."""
    if not _alive(pid):
        return False
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return False
    return str(state) in args


def stop(state: Path, proc: Optional[subprocess.Popen] = None, timeout: float = 45) -> list[str]:
    """Stop the cluster in `state`; returns what was still running and had to be killed."""
    state = state.absolute()
    s = status_of(state)
    pid = proc.pid if proc else s.get("outer_pid")
    if proc is None and not _ours(pid, state):
        pid = None
    killed = []
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(pid) and time.monotonic() < deadline:
            if proc:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(0.2)
            else:
                time.sleep(0.2)
        if _alive(pid):
            killed.append(f"outer {pid}")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    if proc:
        proc.wait()
    for what in ("unshare_pid",):
        if _ours(s.get(what), state):
            killed.append(f"{what} {s[what]}")
            with contextlib.suppress(ProcessLookupError):
                os.kill(s[what], signal.SIGKILL)
    return killed


def _lineage(pid: int) -> set[int]:
    """`pid` and its ancestors: the command asking, and what started it (dev.py, sudo, a shell)."""
    seen: set[int] = set()
    while pid > 0 and pid not in seen:
        seen.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return seen


def leftovers(state: Path) -> list[str]:
    """Processes of this cluster still alive: every one of them names its directory in an argument.
    Not this process nor its ancestors: `dev.py cluster down --state DIR` (or `sudo ...`) names the
    directory too, and is not the cluster."""
    state = state.absolute()
    here, inside = str(state), str(state) + os.sep
    asking = _lineage(os.getpid())
    left = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in asking:
            continue
        with contextlib.suppress(OSError):
            args = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
            if any(a == here or inside in a for a in args) and _alive(int(proc.name)):
                left.append(f"{proc.name}: {' '.join(args).strip()}")
    return left


@contextlib.contextmanager
def running(state: Path, bins: Mapping[str, Path], crd_dir: Optional[Path] = None, **kw) -> Iterator[Handle]:
    handle = up(state, bins, crd_dir, attached=True, **kw)
    try:
        yield handle
    finally:
        stop(state, handle.process)


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["inner"]:
        return inner(Path(argv[1]))
    if argv[:1] == ["serve"]:
        return serve(Path(argv[1]), int(argv[2]), "--attached" in argv)
    print("usage: python -m infra.lab.cluster {up,down,status}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())

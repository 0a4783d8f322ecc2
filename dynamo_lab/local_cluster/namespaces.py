"""The cluster's two processes around its namespaces, so that every path tears everything down:

  outer (`serve`)                  in the caller's network namespace; listens on 127.0.0.1:PORT
   |                                and forwards each connection to the inner's Unix socket
   `- unshare --net --pid --fork --kill-child       (dies with the outer: PR_SET_PDEATHSIG)
       `- inner (`inner`)                           PID 1 of a new PID namespace, in a new network
            |                                        namespace: brings loopback up, serves the Unix
            `- etcd, kube-apiserver, ...             socket, runs the control plane

When the inner ends, however it ends, the kernel kills every process of its PID namespace, and the
network namespace goes with its last process: nothing to delete by hand. The inner stops when its
stdin (a pipe from the outer) closes, on SIGTERM, or when `unshare` dies (--kill-child); the outer
stops on SIGTERM/SIGINT/SIGHUP (`down`) and dies with its parent when it was started attached (the
pytest fixture), so even a killed test run leaves nothing behind. Both run as
`python -m dynamo_lab.local_cluster.harness inner|serve STATE` (harness.main).

Standard library only, but for PyYAML when CRD files are applied.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from dynamo_lab.local_cluster import forward, status
from dynamo_lab.local_cluster.api import Api, LocalClusterError, apply_crds
from dynamo_lab.local_cluster.components import lab_components
from dynamo_lab.local_cluster.control_plane import ControlPlane
from dynamo_lab.local_cluster.state import APISERVER_PORT, Startup, StateDir, kubeconfig, write_private
from dynamo_lab.paths import ROOT

PR_SET_PDEATHSIG = 1


def pdeathsig() -> None:
    """In the child, before exec: SIGKILL when the parent ends."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


# ---- the inner: PID 1 of the namespaces ----

def _loopback_only() -> list[str]:
    """Loopback brought up; the namespace's addresses (`ip -o addr`), refused if it has another link."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True, capture_output=True)
    addrs = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    if any(not line.split(":")[1].strip().startswith("lo") for line in links.splitlines() if line.strip()):
        raise LocalClusterError(f"the namespace has links besides loopback:\n{links}")
    return addrs.split("\n")


def outage_wait(sd: StateDir, stopping: threading.Event, seconds: float) -> None:
    """An outage's wait: `seconds` at most, over as soon as its end is asked for (Handle.end_outage)
    or the cluster is stopping, so a fault test waits only as long as what it tests takes."""
    deadline = time.monotonic() + seconds
    while not sd.apiserver_outage_end.exists() and not stopping.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            return
        stopping.wait(min(0.2, left))


def inner(state: Path) -> int:
    # What etcd and the apiserver write (its serving key in pki/, etcd's data) is the owner's only.
    os.umask(0o077)
    sd = StateDir(state)
    plan = Startup.read(sd.plan)
    stopping = threading.Event()

    def record(**fields) -> None:
        status.update(sd.status, **fields)

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
    plane = None
    try:
        record(inner_pid_host_view=os.getpid(), addresses=_loopback_only())
        api = Api(f"https://127.0.0.1:{APISERVER_PORT}", plan.token, sd.ca)
        sd.logs.mkdir(parents=True, exist_ok=True)
        forward.serve_socket(sd)   # each connection refused (closed) until the API server listens
        plane = ControlPlane(lab_components(sd, plan, api), record=record, stopping=stopping.is_set)
        plane.start()
        crds = apply_crds(api, Path(plan.crd_dir)) if plan.crd_dir else []
        record(ready=True, crds=crds, pids=plane.pids())
        while not stopping.wait(0.5):
            if sd.apiserver_outage.exists():
                plane.outage(float(sd.apiserver_outage.read_text().strip() or 10),
                             wait=lambda s: outage_wait(sd, stopping, s))
                sd.apiserver_outage_end.unlink(missing_ok=True)  # first: a later outage waits its own end
                sd.apiserver_outage.unlink()
            gone = plane.exited()
            if gone:
                raise LocalClusterError(gone)
        return 0
    except LocalClusterError as e:
        record(error=str(e))
        return 1
    except Exception as e:  # noqa: BLE001 - reported to the outer, then everything stops
        record(error=f"{type(e).__name__}: {e}")
        return 1
    finally:
        if plane is not None:
            plane.stop()   # in reverse order, clients before the apiserver, the apiserver before etcd
        # Leaving PID 1 kills whatever is left in the PID namespace.


# ---- the outer: in the caller's namespace ----

def serve(state: Path, port: int, attached: bool) -> int:
    """The outer: start the inner in its namespaces, forward 127.0.0.1:port to it, wait for a signal."""
    sd = StateDir(state)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    port = listener.getsockname()[1]
    plan = Startup.read(sd.plan)
    write_private(sd.kubeconfig, json.dumps(kubeconfig(f"https://127.0.0.1:{port}", sd.ca, plan.token)))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(sd.logs / "inner.log", "ab") as log:
        child = subprocess.Popen(
            ["unshare", "--net", "--pid", "--fork", "--kill-child", sys.executable, "-m",
             "dynamo_lab.local_cluster.harness", "inner", str(state)],
            stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
            preexec_fn=pdeathsig)
    status.update(sd.status, outer_pid=os.getpid(), unshare_pid=child.pid, port=port, attached=attached)
    forward.serve(listener, lambda: forward.unix(sd.socket))
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
        status.update(sd.status, stopped=True, exit=child.returncode)
    return 0 if child.returncode == 0 else 1

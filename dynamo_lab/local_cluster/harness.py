"""A local lab cluster, for the CLI and the pytest fixtures: `up` (start one and wait until it is
ready), `stop`, `running` (up, then stopped however the block ends), `leftovers` (what of it still
runs) and the `Handle` a caller holds. The cluster is etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok (the lab's two GPU nodes, simulated; components.py, control_plane.py) in a
network namespace of their own, where only loopback exists (namespaces.py).

`python -m dynamo_lab.local_cluster.harness inner|serve STATE` runs one of the cluster's own processes
(namespaces.py); `dynamo-lab local-cluster up|down|status` is the shell's command line.

Standard library only, but for PyYAML when CRD files are applied.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, Mapping, Optional, Sequence

from dynamo_lab.local_cluster.api import Api, LocalClusterError
from dynamo_lab.local_cluster.namespaces import inner, pdeathsig, serve
from dynamo_lab.local_cluster.nodes import LAB_CLUSTER
from dynamo_lab.local_cluster.state import Startup, StateDir, prepare
from dynamo_lab.local_cluster.status import Status, status_of
from dynamo_lab.paths import ROOT


@dataclasses.dataclass
class Handle:
    state_dir: StateDir
    process: Optional[subprocess.Popen]   # the outer, when we started it
    status: Status

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir.kubeconfig

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.status.port}"

    def api(self) -> Api:
        return Api(self.server, Startup.read(self.state_dir.plan).token, self.state_dir.ca)

    def stop_apiserver(self, seconds: float) -> None:
        """Ask the control plane for an outage: its API server stopped until `end_outage` or for
        `seconds`, whichever comes first, then started again (ControlPlane.outage; returns at once;
        see `apiserver_back`)."""
        self.state_dir.apiserver_outage.write_text(f"{seconds}\n")

    def end_outage(self) -> None:
        """Ask for the API server to be started again now (returns at once; see `apiserver_back`)."""
        self.state_dir.apiserver_outage_end.write_text("\n")

    def apiserver_back(self) -> bool:
        return not self.state_dir.apiserver_outage.exists() and status_of(self.state_dir.path).apiserver == "running"


def attach(state: Path) -> Handle:
    """A handle on the cluster already running in `state` (one this process did not start)."""
    return Handle(StateDir(state), None, status_of(state))


def up(state: Path, bins: Mapping[str, Path], crd_dir: Optional[Path] = None, attached: bool = True,
       timeout: float = 300, log=print, nodes_from: Path = LAB_CLUSTER) -> Handle:
    """Start a cluster and wait until it is ready (its nodes Ready, its CRDs established). Its kwok
    nodes are those of a saved `kubectl get nodes -o json` (`nodes_from`; the lab's by default).

    attached: the cluster dies with this process (the pytest fixture); otherwise it outlives it
    (`dynamo-lab local-cluster up`) until `down`.
    """
    state = state.absolute()
    sd = prepare(state, bins, crd_dir, nodes_from=nodes_from)
    argv = [sys.executable, "-m", "dynamo_lab.local_cluster.harness", "serve", str(state), "0"]
    if attached:
        argv.append("--attached")
    with open(sd.logs / "outer.log", "ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                                preexec_fn=pdeathsig if attached else None, start_new_session=not attached)
    t0 = time.monotonic()
    try:
        def ready():
            s = status_of(state)
            if s.error:
                raise LocalClusterError(s.error)
            if proc.poll() is not None:
                raise LocalClusterError(f"the harness exited ({proc.returncode}); logs in {sd.logs}")
            return bool(s.ready)
        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > deadline:
                raise LocalClusterError(f"not ready after {timeout:.0f} s; logs in {sd.logs}")
            time.sleep(0.3)
    except BaseException:
        stop(state, proc)
        raise
    s = status_of(state)
    log(f"local cluster up in {time.monotonic() - t0:.1f} s: {sd.kubeconfig} ({s.port}); "
        + ", ".join(f"{name} {seconds} s" for name, seconds in s.ready_s.items()))
    return Handle(sd, proc, s)


def alive(pid: Optional[int]) -> bool:
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


def ours(pid: Optional[int], state: Path) -> bool:
    """Alive and one of this cluster's (it names `state`): a pid in an old status file may be reused."""
    if not alive(pid):
        return False
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return False
    return str(state) in args


def is_running(state: Path) -> bool:
    """The cluster in `state` is up (ready) and its outer is this cluster's and alive."""
    s = status_of(state)
    return bool(s.ready) and ours(s.outer_pid, state.absolute())


def stop(state: Path, proc: Optional[subprocess.Popen] = None, timeout: float = 45) -> list[str]:
    """Stop the cluster in `state`; returns what was still running and had to be killed."""
    state = state.absolute()
    s = status_of(state)
    pid = proc.pid if proc else s.outer_pid
    if proc is None and not ours(pid, state):
        pid = None
    killed = []
    if alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while alive(pid) and time.monotonic() < deadline:
            if proc:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(0.2)
            else:
                time.sleep(0.2)
        if alive(pid):
            killed.append(f"outer {pid}")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    if proc:
        proc.wait()
    if ours(s.unshare_pid, state):
        killed.append(f"unshare_pid {s.unshare_pid}")
        with contextlib.suppress(ProcessLookupError):
            os.kill(s.unshare_pid, signal.SIGKILL)
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
    Not this process nor its ancestors: `dev.py local-cluster down --state DIR` (or `sudo ...`) names the
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
            if any(a == here or inside in a for a in args) and alive(int(proc.name)):
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
    print("usage: python -m dynamo_lab.local_cluster {up,down,status}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())

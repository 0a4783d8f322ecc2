"""The control plane: its components started in order, each once the one before is ready; when a
start fails, what had started is stopped again, last first (as envtest's ControlPlane does), and the
failure raised. It is stopped the same way, clients before the API server, the API server before
etcd. Its controls: `outage`, the API server stopped for a while and started again as it was (the
fault tests' outage), and `exited`, a component that ended on its own.

What it learns (each component's start and stop seconds, the API server's outage) it hands to
`record`, the status file's update in the inner (status.py); a test passes its own.

Standard library only.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional, Sequence, TypeVar

from dynamo_lab.local_cluster.api import LocalClusterError
from dynamo_lab.local_cluster.components import ControlPlaneProcess, KubeApiserver

C = TypeVar("C", bound=ControlPlaneProcess)


def _nothing(**fields: Any) -> None:
    return None


class ControlPlane:
    def __init__(self, components: Sequence[ControlPlaneProcess], record: Callable[..., Any] = _nothing,
                 stopping: Callable[[], bool] = lambda: False):
        self.components = list(components)
        self.record, self.stopping = record, stopping
        self.started: list[ControlPlaneProcess] = []     # in start order; a failed start's component included

    def start(self) -> None:
        """Start every component in order. A failure (a component that exits or is not ready in time,
        or `stopping()` true between two starts) stops what was started, last first, and is raised."""
        try:
            for component in self.components:
                if self.stopping():
                    raise LocalClusterError("stopped while starting")
                t0 = time.monotonic()
                self.started.append(component)  # before its start: a process that is not ready is stopped too
                component.start()
                self.record(ready_s={component.name: round(time.monotonic() - t0, 1)})
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop what was started, last first; each component once."""
        while self.started:
            component = self.started.pop()
            t0 = time.monotonic()
            component.stop()
            try:
                self.record(stop_s={component.name: round(time.monotonic() - t0, 1)})
            except OSError:  # the directory may be going: stopping matters more than saying so
                pass

    def component(self, kind: type[C]) -> C:
        (found,) = [c for c in self.components if isinstance(c, kind)]
        return found

    def pids(self) -> dict[str, int]:
        return {c.name: c.process.pid for c in self.started if c.process is not None}

    def exited(self) -> Optional[str]:
        """The first started component whose process has ended, in words (None: all run)."""
        for c in self.started:
            code = c.exited()
            if code is not None:
                return f"{c.name} exited with {code}"
        return None

    def outage(self, seconds: float, wait: Callable[[float], None] = time.sleep) -> None:
        """Stop the API server, `wait(seconds)`, then start it again as it was started (a fault test:
        what a client sees when the API server goes away during its work). `wait` may return sooner,
        when whoever asked for the outage ends it (the inner's: namespaces.py); `seconds` is then its
        bound. A restart that fails is raised."""
        apiserver = self.component(KubeApiserver)
        apiserver.stop(20)
        self.record(apiserver="stopped", apiserver_stopped_at=time.time())
        wait(seconds)
        apiserver.start(f"{apiserver.name} (restarted)")
        self.record(apiserver="running", apiserver_restarted_at=time.time())

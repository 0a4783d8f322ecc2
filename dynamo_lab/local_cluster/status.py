"""The status file one cluster's processes share (status.json in its directory): how far the cluster
is, typed (`Status`), and how each process adds what it knows (`update`) without losing what the
other wrote: the outer writes its pids and port, the inner its addresses, each component's start
and stop time, readiness, the CRDs, the API server outage and any error.

The file is flat JSON, its keys in the order the cluster reaches them (`dynamo-lab local-cluster
status` prints it): `ready_<component>_s` and `stop_<component>_s` for each component's seconds.

Standard library only.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import re
from pathlib import Path
from typing import Any, Optional

from dynamo_lab.local_cluster.state import StateDir

_PER_COMPONENT = re.compile(r"^(ready|stop)_(.+)_s$")


@dataclasses.dataclass
class Status:
    outer_pid: Optional[int] = None                 # the outer (harness serve), in the caller's namespaces
    unshare_pid: Optional[int] = None
    port: Optional[int] = None                      # 127.0.0.1:port, forwarded to the API server
    attached: Optional[bool] = None                 # the cluster dies with the process that started it
    inner_pid_host_view: Optional[int] = None
    addresses: Optional[list[str]] = None           # `ip -o addr` inside the namespace: loopback only
    ready_s: dict[str, float] = dataclasses.field(default_factory=dict)   # seconds each took to be ready
    ready: Optional[bool] = None
    crds: Optional[list[str]] = None
    pids: Optional[dict[str, int]] = None
    apiserver: Optional[str] = None                 # "stopped" during an outage, then "running"
    apiserver_stopped_at: Optional[float] = None
    apiserver_restarted_at: Optional[float] = None
    error: Optional[str] = None                     # why the inner stopped, when it failed
    stop_s: dict[str, float] = dataclasses.field(default_factory=dict)    # seconds each took to stop
    stopped: Optional[bool] = None                  # the outer has ended
    exit: Optional[int] = None                      # the inner's exit code

    def to_json(self) -> dict[str, Any]:
        """The file's keys: the fields that are set, in order, each component's seconds flat."""
        out: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name in ("ready_s", "stop_s"):
                kind = field.name[:-2]
                out.update({f"{kind}_{name}_s": seconds for name, seconds in value.items()})
            elif value is not None:
                out[field.name] = value
        return out

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> "Status":
        status, names = cls(), {f.name for f in dataclasses.fields(cls)}
        for key, value in raw.items():
            per = _PER_COMPONENT.match(key)
            if per:
                getattr(status, f"{per.group(1)}_s")[per.group(2)] = value
            elif key in names and key not in ("ready_s", "stop_s"):
                setattr(status, key, value)
        return status

    @classmethod
    def read(cls, path: Path) -> "Status":
        """The file's status; empty when there is none (yet) or it cannot be read."""
        try:
            return cls.from_json(json.loads(path.read_text()))
        except (OSError, ValueError):
            return cls()


def update(path: Path, **fields: Any) -> Status:
    """Add `fields` to the status file (`ready_s`/`stop_s`: merged, component by component) and write
    it whole, under a lock the outer and the inner share, so neither loses what the other wrote."""
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        status = Status.read(path)
        for name, value in fields.items():
            if name in ("ready_s", "stop_s"):
                getattr(status, name).update(value)
            elif name in {f.name for f in dataclasses.fields(Status)}:
                setattr(status, name, value)
            else:
                raise TypeError(f"the status has no field {name!r}")
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(status.to_json(), indent=2) + "\n")
        tmp.replace(path)
    return status


def status_of(state: Path) -> Status:
    """The status of the cluster whose directory is `state`."""
    return Status.read(StateDir(state).status)

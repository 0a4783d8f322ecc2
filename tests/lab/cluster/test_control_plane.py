"""The control plane, without a cluster (fast tier, no root): components start in order, a failed
start stops what had started, last first, and says which failed; the outage is a control of it;
the status file is typed. Fake components where the order is the point; real processes where
stopping one is."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest

from dynamo_lab.local_cluster import status
from dynamo_lab.local_cluster.api import LocalClusterError
from dynamo_lab.local_cluster.components import ControlPlaneProcess, KubeApiserver
from dynamo_lab.local_cluster.control_plane import ControlPlane
from dynamo_lab.local_cluster.namespaces import outage_wait
from dynamo_lab.local_cluster.state import StateDir


class Fake(ControlPlaneProcess):
    """A component that starts and stops nothing but says so in `seen`; `fail` makes its start fail."""

    def __init__(self, name: str, seen: list[str], fail: str = "", code=None):
        self.name, self.seen, self.fail, self.code, self.process = name, seen, fail, code, None

    def start(self, what=None) -> None:
        self.seen.append(f"start {what or self.name}")
        if self.fail:
            raise LocalClusterError(f"{self.name}: {self.fail}")

    def stop(self, grace=None) -> None:
        self.seen.append(f"stop {self.name}" + (f" {grace}" if grace is not None else ""))

    def exited(self):
        return self.code


class FakeApiserver(KubeApiserver, Fake):
    def __init__(self, seen: list[str], fail: str = ""):
        Fake.__init__(self, "kube-apiserver", seen, fail)

    start, stop, exited = Fake.start, Fake.stop, Fake.exited


def test_a_failed_second_start_stops_the_first_and_starts_nothing_after_it():
    seen: list[str] = []
    recorded: list[dict] = []
    plane = ControlPlane([Fake("etcd", seen), Fake("kube-apiserver", seen, fail="exited with 1 before it was ready"),
                          Fake("kube-scheduler", seen)], record=lambda **f: recorded.append(f))
    with pytest.raises(LocalClusterError, match="kube-apiserver: exited with 1 before it was ready"):
        plane.start()
    # The failed one is stopped too (its process may be running, not ready), then the first.
    assert seen == ["start etcd", "start kube-apiserver", "stop kube-apiserver", "stop etcd"]
    assert [list(f) for f in recorded] == [["ready_s"], ["stop_s"], ["stop_s"]]
    assert list(recorded[0]["ready_s"]) == ["etcd"]
    assert plane.started == []
    plane.stop()  # nothing is stopped twice
    assert seen[-1] == "stop etcd" and len(seen) == 4


def test_stop_is_the_start_order_reversed_and_each_component_is_stopped_once():
    seen: list[str] = []
    plane = ControlPlane([Fake(n, seen) for n in ("etcd", "kube-apiserver", "kube-controller-manager", "kwok")])
    plane.start()
    plane.stop()
    plane.stop()
    assert seen == ["start etcd", "start kube-apiserver", "start kube-controller-manager", "start kwok",
                    "stop kwok", "stop kube-controller-manager", "stop kube-apiserver", "stop etcd"]


def test_a_stop_asked_for_while_starting_stops_what_started():
    seen: list[str] = []
    plane = ControlPlane([Fake("etcd", seen), Fake("kube-apiserver", seen)], stopping=lambda: bool(seen))
    with pytest.raises(LocalClusterError, match="stopped while starting"):
        plane.start()
    assert seen == ["start etcd", "stop etcd"]


def test_the_outage_stops_the_api_server_for_its_seconds_then_starts_it_again_as_it_was():
    seen: list[str] = []
    recorded: list[dict] = []
    plane = ControlPlane([Fake("etcd", seen), FakeApiserver(seen), Fake("kube-scheduler", seen)],
                         record=lambda **f: recorded.append(f))
    plane.start()
    del seen[:], recorded[:]
    plane.outage(40, wait=lambda s: seen.append(f"down {s} s"))
    assert seen == ["stop kube-apiserver 20", "down 40 s", "start kube-apiserver (restarted)"]
    assert [f["apiserver"] for f in recorded] == ["stopped", "running"]
    assert recorded[0]["apiserver_stopped_at"] <= recorded[1]["apiserver_restarted_at"]


def test_an_api_server_that_does_not_come_back_fails_the_outage():
    seen: list[str] = []
    apiserver = FakeApiserver(seen)
    plane = ControlPlane([apiserver])
    plane.start()
    apiserver.fail = "not ready after 120 s"
    recorded: list[dict] = []
    plane.record = lambda **f: recorded.append(f)
    with pytest.raises(LocalClusterError, match="not ready after 120 s"):
        plane.outage(1, wait=lambda s: None)
    assert [f.get("apiserver") for f in recorded] == ["stopped"]


def test_a_component_that_ended_on_its_own_is_named():
    seen: list[str] = []
    scheduler = Fake("kube-scheduler", seen)
    plane = ControlPlane([Fake("etcd", seen), scheduler])
    plane.start()
    assert plane.exited() is None
    scheduler.code = 3
    assert plane.exited() == "kube-scheduler exited with 3"


class Python(ControlPlaneProcess):
    """A real process: python running `code`; ready at once."""

    def __init__(self, name: str, tmp: Path, code: str):
        (tmp / "logs").mkdir(exist_ok=True)
        super().__init__(StateDir(tmp), Path(sys.executable).parent, None)
        self.name, self.code, self.ready_timeout = name, code, 5.0

    def argv(self) -> list[str]:
        return [sys.executable, "-c", self.code]

    def ready(self) -> bool:
        return "up" in self.log.read_text()


def test_a_real_process_that_started_is_stopped_when_the_next_one_exits_before_it_is_ready(tmp_path):
    first = Python("first", tmp_path, "import time; print('up', flush=True); time.sleep(60)")
    second = Python("second", tmp_path, "import sys; print('no such flag', flush=True); sys.exit(2)")
    plane = ControlPlane([first, second])
    with pytest.raises(LocalClusterError, match="second: exited with 2 before it was ready:\nno such flag"):
        plane.start()
    assert first.process.poll() is not None and second.process.poll() == 2


# ---- the status file ----

def test_the_status_is_written_flat_in_the_order_the_cluster_reaches_it(tmp_path):
    path = tmp_path / "status.json"
    status.update(path, outer_pid=10, unshare_pid=11, port=4321, attached=True)
    status.update(path, inner_pid_host_view=1, addresses=["1: lo inet 127.0.0.1/8"])
    status.update(path, ready_s={"etcd": 0.5})
    status.update(path, ready_s={"kube-apiserver": 3.2})
    status.update(path, ready=True, crds=[], pids={"etcd": 5, "kube-apiserver": 6})
    status.update(path, stop_s={"kube-apiserver": 0.1})
    status.update(path, stop_s={"etcd": 0.0})
    status.update(path, stopped=True, exit=0)
    raw = json.loads(path.read_text())
    assert list(raw) == ["outer_pid", "unshare_pid", "port", "attached", "inner_pid_host_view", "addresses",
                         "ready_etcd_s", "ready_kube-apiserver_s", "ready", "crds", "pids",
                         "stop_kube-apiserver_s", "stop_etcd_s", "stopped", "exit"]
    read = status.Status.read(path)
    assert read.ready_s == {"etcd": 0.5, "kube-apiserver": 3.2} and read.port == 4321 and read.ready is True
    assert read.to_json() == raw and path.read_text() == json.dumps(raw, indent=2) + "\n"


def test_no_status_file_reads_as_an_empty_status(tmp_path):
    empty = status.status_of(tmp_path)
    assert empty == status.Status() and empty.to_json() == {} and empty.ready is None


def test_a_field_the_status_does_not_have_is_refused(tmp_path):
    with pytest.raises(TypeError, match="no field 'apiserver_state'"):
        status.update(tmp_path / "status.json", apiserver_state="down")


def test_an_outage_waits_until_its_end_is_asked_for_its_bound_or_the_stop(tmp_path):
    # The fault test's outage lasts as long as the `up` it tests takes, not a fixed time: the inner's
    # wait ends when Handle.end_outage writes its file, at its bound, or when the cluster stops.
    sd = StateDir(tmp_path)
    stopping = threading.Event()
    started = time.monotonic()
    outage_wait(sd, stopping, 0.3)
    assert time.monotonic() - started >= 0.3  # nothing asked: the bound
    sd.apiserver_outage_end.write_text("\n")
    started = time.monotonic()
    outage_wait(sd, stopping, 60)
    assert time.monotonic() - started < 5  # asked: at once, not after 60 s
    sd.apiserver_outage_end.unlink()
    stopping.set()
    started = time.monotonic()
    outage_wait(sd, stopping, 60)
    assert time.monotonic() - started < 5

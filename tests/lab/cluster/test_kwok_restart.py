"""The local cluster's one retry (cluster tier): kwok v0.8.0 can die at start with "fatal error:
concurrent map writes", its own start race, seen about once in ten starts and not on demand. A
kwok in front of the real one plays that crash, once, so the retry path runs: the harness starts
kwok again, only for that message, and the cluster comes up; any other early exit still fails the
start, and leaves no process behind."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from dynamo_lab.local_cluster import api, components, harness
from dynamo_lab.local_cluster.tools import kwok_stages

pytestmark = pytest.mark.cluster

RETRIED = "--- dynamo-lab: kwok died at start (its start race); starting it again ---"


def _kwok_that_dies_first(tmp: Path, real: Path, message: str, every_time: bool = False) -> Path:
    """A bin directory whose kwok prints `message` and exits 2 on its first start (or on every
    start), then runs the real kwok; its Stage files are the real kwok's."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(parents=True)
    (tmp / "stages").symlink_to(kwok_stages(real))
    marker = tmp / "died-once"
    die = "" if every_time else f'[ -e "{marker}" ] && exec "{real / "kwok"}" "$@"\ntouch "{marker}"\n'
    script = bin_dir / "kwok"
    script.write_text(f"#!/bin/sh\n{die}echo '{message}' >&2\nexit 2\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def test_kwok_dying_of_its_start_race_is_started_once_more_and_the_cluster_comes_up(cluster_bins, tmp_path):
    bins = {**cluster_bins, "kwok": _kwok_that_dies_first(tmp_path / "kwok", cluster_bins["kwok"],
                                                          components.KWOK_START_RACE)}
    state = tmp_path / "state"
    with harness.running(state, bins) as handle:
        code, body = handle.api().call("GET", "/api/v1/nodes")
        assert code == 200
        ready = {n["metadata"]["name"]: any(c["type"] == "Ready" and c["status"] == "True"
                                            for c in n["status"].get("conditions", [])) for n in body["items"]}
        assert ready == {"gpu-server": True, "gpu-laptop": True}
        log = (state / "logs" / "kwok.log").read_text()
        assert log.count(RETRIED) == 1 and components.KWOK_START_RACE in log.split(RETRIED)[0]
    assert harness.leftovers(state) == []


def test_kwok_exiting_for_any_other_reason_fails_the_start_and_leaves_nothing(cluster_bins, tmp_path):
    bins = {**cluster_bins, "kwok": _kwok_that_dies_first(tmp_path / "kwok", cluster_bins["kwok"],
                                                          "error: unknown flag", every_time=True)}
    state = tmp_path / "state"
    with pytest.raises(api.LocalClusterError, match="kwok nodes Ready: exited with 2"):
        with harness.running(state, bins):
            pass
    assert RETRIED not in (state / "logs" / "kwok.log").read_text()
    assert harness.leftovers(state) == []

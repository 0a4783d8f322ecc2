"""Every Job a stack runs has a deadline; the measurement Jobs (probe, benchmark), which Pulumi does
not wait for, are deleted a while after they end, once their result, a log, can have been read."""

from __future__ import annotations

import pytest

from tests.helpers import JOB, everything_on, refused, run_stack


def test_every_job_has_a_deadline_and_the_measurement_jobs_are_cleaned_up(stack):
    run = run_stack(stack, everything_on(stack))
    jobs = {r.name: r.inputs for r in run.of_type(JOB)}
    assert {name: "activeDeadlineSeconds" in job["spec"] for name, job in jobs.items()} == dict.fromkeys(jobs, True)
    measuring = {name for name, job in jobs.items()
                 if job["metadata"].get("annotations", {}).get("pulumi.com/skipAwait") == "true"}
    assert measuring == ({"bench-job"} if stack == "kv-routing" else {"bench-job", "probe-target", "probe-initiator"})
    for name in measuring:
        assert jobs[name]["spec"]["ttlSecondsAfterFinished"] == 86400, name  # a day to collect the result
    assert jobs["bench-job"]["spec"]["activeDeadlineSeconds"] == 7200


def test_the_deadlines_and_the_cleanup_are_the_stacks_to_set():
    def edit(c):
        c["benchmark"] = {"enabled": True, "timeoutSeconds": 3600, "ttlSecondsAfterFinished": 600}
        c["probe"] = {"enabled": True, "timeoutSeconds": 300, "ttlSecondsAfterFinished": 0}
    jobs = {r.name: r.inputs["spec"] for r in run_stack("cross-server", edit).of_type(JOB)}
    assert (jobs["bench-job"]["activeDeadlineSeconds"], jobs["bench-job"]["ttlSecondsAfterFinished"]) == (3600, 600)
    for name in ("probe-target", "probe-initiator"):
        assert (jobs[name]["activeDeadlineSeconds"], jobs[name]["ttlSecondsAfterFinished"]) == (300, 0)


@pytest.mark.parametrize("value", [1800, 60, 0])
def test_a_benchmark_deadline_within_its_wait_for_the_frontend_is_refused(value):
    msg = str(refused("cross-server", lambda c: c.update(benchmark={"enabled": True, "timeoutSeconds": value})))
    assert msg.startswith("Pulumi.cross-server.yaml: benchmark.timeoutSeconds: ")
    assert "1800" in msg


@pytest.mark.parametrize("key", ["benchmark", "probe"])
def test_a_negative_cleanup_delay_is_refused(key):
    msg = str(refused("cross-server", lambda c: c.update({key: {"ttlSecondsAfterFinished": -1}})))
    assert f"{key}.ttlSecondsAfterFinished: " in msg

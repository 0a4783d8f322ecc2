"""The in-cluster benchmark Job, under mocks: what it runs, where, against what, and when it re-runs."""

from __future__ import annotations

import json

import pytest

from infra import payloads
from tests.helpers import CONFIGMAP, DGD, JOB, ROOT, STACKS, refused, run_stack

ENABLE = {"benchmark": {"enabled": True}}


def _job(run):
    (job,) = [r.inputs for r in run.of_type(JOB) if r.name == "bench-job"]
    (cm,) = [r.inputs for r in run.of_type(CONFIGMAP)]
    return job, cm


@pytest.mark.parametrize("stack", STACKS)
def test_benchmark_job_renders_for_every_stack(stack):
    run = run_stack(stack, lambda c: c.update(ENABLE))
    job, cm = _job(run)
    (c,) = job["spec"]["template"]["spec"]["containers"]
    assert c["image"] == "python:3.11-slim"
    # AIPerf and every dependency from hash-pinned requirements, shipped beside the sweep.
    assert ("pip install --user --quiet --disable-pip-version-check --require-hashes --no-deps --only-binary :all: "
            "-r /bench/requirements.txt") in c["command"][2]
    assert "/bench/aiperf_sweep.py --plan /bench/plan.json" in c["command"][2]
    assert cm["data"]["requirements.txt"] == (ROOT / "infra" / "payloads" / "aiperf-requirements.txt").read_text()
    assert not any("gpu" in k for k in c["resources"]["requests"])
    assert "affinity" not in job["spec"]["template"]["spec"]  # runs anywhere unless configured
    volumes = job["spec"]["template"]["spec"]["volumes"]
    assert volumes == [{"name": "bench", "configMap": {"name": cm["metadata"]["name"]}},
                       {"name": "home", "emptyDir": {}}]
    # The python image would run as root: the Job runs as nobody and pip-installs into its own home.
    pod = job["spec"]["template"]["spec"]
    assert (pod["securityContext"]["runAsUser"], pod["automountServiceAccountToken"]) == (65534, False)

    assert cm["data"]["aiperf_sweep.py"] == (ROOT / "infra" / "payloads" / "aiperf_sweep.py").read_text()
    plan = json.loads(cm["data"]["plan.json"])
    assert plan["url"] == f"http://{stack}-frontend.dynamo-lab-{stack}.svc.cluster.local:8000"
    assert (plan["prefix_types"], plan["concurrency"], plan["runs"]) == ([2, 7, 12, 24], [4, 8], 3)
    assert plan["prefix_tokens"] + plan["unique_tokens"] == 2371
    name = job["metadata"]["name"]
    assert run.outputs["benchJob"] == name
    assert run.outputs["benchLogs"] == (
        f"kubectl --context dynamo-lab logs -n dynamo-lab-{stack} job/{name} | grep '^{{'")
    (dgd,) = run.of_type(DGD)
    (job_reg,) = [r for r in run.of_type(JOB) if r.name == "bench-job"]
    assert dgd.urn in job_reg.dependencies


def test_a_changed_plan_or_script_is_a_new_job_and_configmap(monkeypatch):
    def names(edit=None):
        run = run_stack("same-server", lambda c: (c.update(ENABLE), edit and edit(c)))
        job, cm = _job(run)
        return job["metadata"]["name"], cm["metadata"]["name"]

    first = names()
    assert first == names(), "the same content must keep its names (no re-run on every up)"
    job, cm = first
    assert job == cm and job.startswith("same-server-bench-") and len(job) == len("same-server-bench-") + 10
    changed_plan = names(lambda c: c["benchmark"].update(runs=1))
    assert changed_plan[0] != job and changed_plan[1] != cm
    real_source = payloads.source
    monkeypatch.setattr(payloads, "source", lambda name: real_source(name) + "\n# changed\n")
    assert names()[0] != job


def test_benchmark_job_placement_is_configurable():
    rule = {"key": "kubernetes.io/hostname", "operator": "In", "values": ["cpu-node"]}
    run = run_stack("kv-routing", lambda c: c.update(benchmark={"enabled": True, "nodeSelector": [rule]}))
    job, _ = _job(run)
    aff = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    assert aff["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [{"matchExpressions": [rule]}]


def test_the_benchmark_requirements_pin_every_package_by_hash_and_the_schemas_aiperf():
    text = (ROOT / "infra" / "payloads" / "aiperf-requirements.txt").read_text()
    entries = [e for e in text.replace("\\\n", " ").splitlines() if e.strip() and not e.lstrip().startswith("#")]
    assert len(entries) > 50
    for entry in entries:
        name, rest = entry.split("==", 1)
        assert "--hash=sha256:" in rest, name
    assert "aiperf==0.13.0 " in text.replace("\\\n", " ")


def test_another_aiperf_version_than_the_requirements_pin_is_refused():
    msg = str(refused("same-server", lambda c: c.update(benchmark={"enabled": True, "aiperfVersion": "0.14.0"})))
    assert msg.startswith("Pulumi.same-server.yaml: benchmark.aiperfVersion: 0.14.0 is not the AIPerf the benchmark "
                          "Job installs: it installs 0.13.0 and each of its dependencies from hash-pinned requirements")

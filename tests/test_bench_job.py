"""The in-cluster benchmark Job and the twin's worker plan, under mocks / as pure data."""

from __future__ import annotations

import json

import pytest

from infra import twin
from infra.config import load
from infra.render import normalize
from infra.sizing import size
from tests.conftest import STACKS, raw_config, run_stack

ENABLE = {"benchmark": {"enabled": True}}


def _job(run):
    (job,) = [normalize(r.inputs) for r in run.resources if r.type == "kubernetes:batch/v1:Job"]
    (cm,) = [normalize(r.inputs) for r in run.resources if r.type == "kubernetes:core/v1:ConfigMap"]
    return job, cm


@pytest.mark.parametrize("stack", STACKS)
def test_benchmark_job_renders_for_every_stack(stack):
    run = run_stack(stack, lambda c: c.update(ENABLE))
    job, cm = _job(run)
    (c,) = job["spec"]["template"]["spec"]["containers"]
    assert c["image"] == "python:3.11-slim"
    assert "aiperf==0.13.0" in c["command"][2] and "/bench/aiperf_sweep.py --plan /bench/plan.json" in c["command"][2]
    assert not any("gpu" in k for k in c["resources"]["requests"])
    assert "affinity" not in job["spec"]["template"]["spec"]  # runs anywhere unless configured
    plan = json.loads(cm["data"]["plan.json"])
    assert plan["url"] == f"http://{stack}-frontend.dynamo-lab-{stack}.svc.cluster.local:8000"
    assert (plan["prefix_types"], plan["concurrency"], plan["runs"]) == ([2, 7, 12, 24], [4, 8], 3)
    assert plan["prefix_tokens"] + plan["unique_tokens"] == 2371
    assert run.outputs["benchLogs"] == f"kubectl logs -n dynamo-lab-{stack} job/{stack}-bench | grep '^{{'"
    (dgd,) = [r for r in run.resources if r.type.endswith("DynamoGraphDeployment")]
    (job_reg,) = [r for r in run.resources if r.type == "kubernetes:batch/v1:Job"]
    assert dgd.urn in job_reg.dependencies


def test_benchmark_job_placement_is_configurable():
    rule = {"key": "kubernetes.io/hostname", "operator": "In", "values": ["cpu-node"]}
    run = run_stack("kv-routing", lambda c: c.update(benchmark={"enabled": True, "nodeSelector": [rule]}))
    job, _ = _job(run)
    aff = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    assert aff["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [{"matchExpressions": [rule]}]


def _plan(stack):
    cfg = load(raw_config(stack), stack)
    return twin.plan(cfg, size(cfg, stack))


def test_twin_runs_one_mocker_per_replica_with_the_sized_path_bandwidth():
    cross = _plan("cross-server")
    assert [(w.role, w.group) for w in cross] == [("prefill", "prefill"), ("decode", "decode"), ("decode", "decode")]
    assert all(w.bandwidth_gb_s == pytest.approx(0.115) for w in cross)
    same = _plan("same-server")
    assert len(same) == 4 and all(w.bandwidth_gb_s == pytest.approx(1.2) for w in same)
    agg = _plan("kv-routing")
    assert len(agg) == 6 and all(w.role == "agg" and w.bandwidth_gb_s is None for w in agg)
    args = cross[0].args("/m", "Qwen/Qwen3-0.6B")
    assert args[args.index("--kv-bytes-per-token") + 1] == "114688"
    assert args[args.index("--disaggregation-mode") + 1] == "prefill"
    assert args[args.index("--kv-transfer-bandwidth") + 1] == "0.115"


def test_twin_uses_a_measured_throughput_when_the_config_has_one():
    def edit(c):
        c["sizing"] = {"measured": [{"fromGroup": "prefill", "toGroup": "decode", "bytesPerSecond": "119M"}]}
    cfg = load(raw_config("cross-server", edit), "cross-server")
    assert {w.bandwidth_gb_s for w in twin.plan(cfg, size(cfg, "cross-server"))} == {0.119}

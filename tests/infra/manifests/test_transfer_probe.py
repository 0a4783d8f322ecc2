"""The in-cluster KV-transfer probe, under mocks: placement, arguments, and re-runs on change."""

from __future__ import annotations

import pytest

from infra import payloads
from infra.errors import ConfigError
from infra.lab import mockrun
from infra.lab.render import normalize
from tests.helpers import CONFIGMAP, JOB, raw_config, run_stack

ENABLE = {"probe": {"enabled": True}}


def _jobs(run):
    jobs = {r.name: normalize(r.inputs) for r in run.of_type(JOB)}
    return jobs["probe-initiator"], jobs["probe-target"]


def _expr(job):
    aff = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    return aff["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]


def test_in_cluster_probe_places_initiator_like_prefill_and_target_like_decode():
    run = run_stack("cross-server", lambda c: c.update(ENABLE))
    initiator, target = _jobs(run)
    assert _expr(initiator) == [{"key": "nvidia.com/gpu.memory", "operator": "Lt", "values": ["12000"]}]
    assert _expr(target) == [{"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["20000"]}]
    (cm,) = [normalize(r.inputs) for r in run.of_type(CONFIGMAP)]
    for job in (initiator, target):
        pod = job["spec"]["template"]["spec"]
        (c,) = pod["containers"]
        assert c["image"] == "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.2"
        assert {e["name"]: e["value"] for e in c["env"]} == {"UCX_TLS": "tcp,self", "UCX_RNDV_THRESH": "inf"}
        assert c["command"] == ["python3", "/probe/kv_probe.py"]
        assert not any("gpu" in k for k in c["resources"]["requests"])  # no GPU taken from the workers
        assert job["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
        assert pod["volumes"] == [{"name": "probe", "configMap": {"name": cm["metadata"]["name"]}}]
    (ci,) = initiator["spec"]["template"]["spec"]["containers"]
    digest = cm["metadata"]["name"].rsplit("-", 1)[1]
    target_host = f"cross-server-kv-probe-target-{digest}.dynamo-lab-cross-server.svc.cluster.local"
    assert ci["args"] == ["initiator", "--connect", f"{target_host}:5555",
                          "--bytes", str(2371 * 114_688), "--repeats", "5", "--timeout", "600"]
    (ct,) = target["spec"]["template"]["spec"]["containers"]
    assert ct["args"][:3] == ["target", "--port", "5555"]
    assert cm["data"]["kv_probe.py"] == payloads.source("kv_probe.py")
    assert run.outputs["probeLogs"] == (
        f"kubectl logs -n dynamo-lab-cross-server job/cross-server-kv-probe-initiator-{digest} | tail -n 1")


def test_a_changed_probe_script_or_argument_names_new_jobs(monkeypatch):
    def names(edit=None):
        run = run_stack("cross-server", lambda c: (c.update(ENABLE), edit and edit(c)))
        return sorted(normalize(r.inputs)["metadata"]["name"] for r in run.resources if r.custom
                      and r.type in (JOB, CONFIGMAP, "kubernetes:core/v1:Service") and r.name.startswith("probe"))

    first = names()
    assert names() == first, "unchanged content keeps its names"
    assert len(set(n.rsplit("-", 1)[1] for n in first)) == 1  # one digest names the whole probe
    more_repeats = names(lambda c: c["probe"].update(repeats=9))
    assert not set(more_repeats) & set(first)
    real_source = payloads.source
    monkeypatch.setattr(payloads, "source", lambda name: real_source(name) + "\n# changed\n")
    assert not set(names()) & set(first)


def test_probe_is_off_by_default():
    run = run_stack("cross-server")
    assert [r for r in run.of_type(JOB) if r.name.startswith("probe")] == []
    assert "probeLogs" not in run.outputs


def test_probe_on_an_aggregated_stack_is_refused():
    with pytest.raises(ConfigError, match="probe.enabled: this graph is aggregated"):
        mockrun.run("kv-routing", raw_config("kv-routing", lambda c: c.update(ENABLE)), [])


def test_probe_group_must_be_of_the_right_role():
    with pytest.raises(ConfigError, match="probe.fromGroup: 'decode' is a decode group, not a prefill group"):
        mockrun.run("cross-server", raw_config("cross-server", lambda c: c.update(
            probe={"enabled": True, "fromGroup": "decode"})), [])

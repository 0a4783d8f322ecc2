"""The in-cluster KV-transfer probe, under mocks: placement, arguments, and re-runs on change."""

from __future__ import annotations

from infra import payloads
from infra.manifests.transfer_probe import stack_plan
from tests.helpers import CONFIGMAP, JOB, refused, run_stack, sized

ENABLE = {"probe": {"enabled": True}}


def _jobs(run):
    jobs = {r.name: r.inputs for r in run.of_type(JOB)}
    return jobs["probe-initiator"], jobs["probe-target"]


def _expr(job):
    aff = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    return aff["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]


GPU_8 = [{"key": "nvidia.com/gpu.memory", "operator": "Lt", "values": ["12000"]}]
GPU_24 = [{"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["20000"]}]
PER_BLOCK = 28 * 64 * 1024  # one block of every layer of Qwen3-0.6B: 1.75Mi


def _transfer_args(op, pool_blocks):
    return ["--bytes", str(2371 * 114_688), "--op", op, "--pattern", "blocks", "--layers", "28",
            "--block-bytes", "65536", "--pool-blocks", str(pool_blocks), "--timeout", "600"]


def _container(job):
    (c,) = job["spec"]["template"]["spec"]["containers"]
    return c


def test_default_probe_reads_from_the_decode_side_like_nixl_connector():
    run = run_stack("cross-server", lambda c: c.update(ENABLE))
    initiator, target = _jobs(run)
    # NixlConnector pulls: the decode worker (gpu-24gb) READs from the prefill worker (gpu-8gb).
    assert _expr(initiator) == GPU_24 and _expr(target) == GPU_8
    (cm,) = [r.inputs for r in run.of_type(CONFIGMAP)]
    for job in (initiator, target):
        pod = job["spec"]["template"]["spec"]
        c = _container(job)
        assert c["image"] == "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.2"
        assert {e["name"]: e["value"] for e in c["env"]} == {"UCX_TLS": "tcp,self", "UCX_RNDV_THRESH": "inf"}
        assert c["command"] == ["python3", "/probe/kv_probe.py"]
        assert not any("gpu" in k for k in c["resources"]["requests"])  # no GPU taken from the workers
        assert job["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
        assert pod["volumes"] == [{"name": "probe", "configMap": {"name": cm["metadata"]["name"]}}]
    digest = cm["metadata"]["name"].rsplit("-", 1)[1]
    target_host = f"cross-server-kv-probe-target-{digest}.dynamo-lab-cross-server.svc.cluster.local"
    # Each side registers its worker's pool: decode 4Gi = 2,340 blocks of 1.75Mi, prefill 2Gi = 1,170.
    assert _container(initiator)["args"] == (["initiator", "--connect", f"{target_host}:5555", "--repeats", "5"]
                                             + _transfer_args("READ", 2340))
    assert _container(target)["args"] == ["target", "--port", "5555"] + _transfer_args("READ", 1170)
    # Memory: the registered pool (4,095Mi and 2,047.5Mi) plus 1Gi, as request and limit.
    assert _container(initiator)["resources"]["limits"]["memory"] == "5119Mi"
    assert _container(target)["resources"]["requests"]["memory"] == "3072Mi"
    assert cm["data"]["kv_probe.py"] == payloads.source("kv_probe.py")
    assert run.outputs["probeLogs"] == (
        "kubectl --context dynamo-lab logs -n dynamo-lab-cross-server "
        f"job/cross-server-kv-probe-initiator-{digest} --tail=1")


def test_a_pool_above_the_cap_is_registered_at_the_cap():
    def edit(c):
        c.update(probe={"enabled": True, "maxPoolBytes": "1Gi"})
    initiator, target = _jobs(run_stack("cross-server", edit))
    # 1Gi holds 585 whole blocks of 1.75Mi (1,023.75Mi): the Job's memory follows the capped pool.
    assert _container(initiator)["args"][-3] == "585" and _container(target)["args"][-3] == "585"
    assert _container(initiator)["resources"]["limits"]["memory"] == "2048Mi"
    assert stack_plan(*sized("cross-server", edit)).pool_basis == (
        "the workers' pools: prefill's and decode's, capped at 1.0Gi (probe.maxPoolBytes)")


def test_a_cap_below_one_transfer_still_registers_one_transfer():
    initiator, _ = _jobs(run_stack("cross-server", lambda c: c.update(
        probe={"enabled": True, "maxPoolBytes": "100Mi"})))
    assert _container(initiator)["args"][-3] == "149"  # 2,371 tokens = 149 blocks of 16


def test_a_changed_probe_script_or_argument_names_new_jobs(monkeypatch):
    def names(edit=None):
        run = run_stack("cross-server", lambda c: (c.update(ENABLE), edit and edit(c)))
        return sorted(r.inputs["metadata"]["name"] for r in run.resources if r.custom
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
    assert "probe.enabled: this graph is aggregated" in str(refused("kv-routing", lambda c: c.update(ENABLE)))


def test_probe_group_must_be_of_the_right_role():
    err = refused("cross-server", lambda c: c.update(probe={"enabled": True, "fromGroup": "decode"}))
    assert "probe.fromGroup: 'decode' is a decode group, not a prefill group" in str(err)

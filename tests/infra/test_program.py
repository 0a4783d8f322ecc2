"""Per variant: what `pulumi up --stack X` would declare, asserted on the mock registrations."""

from __future__ import annotations

import json

import pytest

from tests.helpers import DGD, JOB, RELEASE, STACKS, components, flag, main_container, run_stack

IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.2"
PRODUCER = '{"kv_connector":"NixlConnector","kv_role":"kv_producer","kv_buffer_device":"cpu"}'
CONSUMER = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer","kv_buffer_device":"cpu"}'
GPU_24 = {"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["20000"]}
GPU_8 = {"key": "nvidia.com/gpu.memory", "operator": "Lt", "values": ["12000"]}


def _affinity(component):
    spec = component["podTemplate"]["spec"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    (term,) = terms["nodeSelectorTerms"]
    return term["matchExpressions"]


def _env(container):
    return {e["name"]: e["value"] for e in container.get("env", [])}


def test_shipped_stacks_are_the_three_variants():
    assert STACKS == ["cross-server", "kv-routing", "same-server"]


def test_every_stack_installs_the_pinned_chart_with_grove_and_kai_off(stack):
    run = run_stack(stack)
    (release,) = run.of_type(RELEASE)
    inputs = release.inputs
    assert inputs["chart"] == "dynamo-platform"
    assert inputs["version"] == "1.6.2"
    assert inputs["repositoryOpts"]["repo"] == "https://helm.ngc.nvidia.com/nvidia/ai-dynamo"
    assert inputs["namespace"] == "dynamo-system"
    assert inputs["skipAwait"] is False  # Helm waits for the operator to be Ready
    values = inputs["values"]
    assert values["global"]["grove"] == {"install": False, "enabled": False}
    assert values["global"]["kai-scheduler"] == {"install": False, "enabled": False}
    # The removed top-level keys make the chart fail.
    assert not {"grove", "kai-scheduler", "nats", "etcd"} & set(values)


def test_every_graph_waits_for_the_platform_release(stack):
    run = run_stack(stack)
    (release,) = run.of_type(RELEASE)
    (dgd,) = run.of_type(DGD)
    assert release.urn in dgd.dependencies


def test_children_are_parented_to_their_component(stack):
    run = run_stack(stack)
    by_name = {r.name: r for r in run.resources}
    platform, graph = by_name["platform"], by_name["graph"]
    assert platform.type == "dynamo-lab:index:DynamoPlatform"
    assert graph.type == "dynamo-lab:index:ServingGraph"
    assert by_name["platform-release"].parent == platform.urn
    assert by_name["platform-ns"].parent == platform.urn
    assert by_name["graph-dgd"].parent == graph.urn
    assert by_name["graph-ns"].parent == graph.urn


def test_every_container_uses_the_pinned_image_and_the_frontend_routes_by_kv(stack):
    comps = components(run_stack(stack))
    for comp in comps.values():
        assert main_container(comp)["image"] == IMAGE
    frontend = comps["frontend"]
    assert frontend["type"] == "frontend"
    assert _env(main_container(frontend)) == {"DYN_ROUTER_MODE": "kv"}


def test_cross_server_places_prefill_on_8gb_and_decode_on_24gb():
    run = run_stack("cross-server")
    (dgd,) = run.of_type(DGD)
    assert dgd.inputs["apiVersion"] == "nvidia.com/v1beta1"
    assert dgd.inputs["kind"] == "DynamoGraphDeployment"
    assert dgd.inputs["metadata"] == {"name": "cross-server", "namespace": "dynamo-lab-cross-server",
                                      "annotations": {"pulumi.com/waitFor": "condition=Ready",
                                                      "pulumi.com/timeoutSeconds": "1800"}}
    comps = components(run)
    assert sorted(comps) == ["decode", "frontend", "prefill"]
    prefill, decode = comps["prefill"], comps["decode"]
    assert (prefill["type"], prefill["replicas"]) == ("prefill", 1)
    assert (decode["type"], decode["replicas"]) == ("decode", 2)
    assert _affinity(prefill) == [GPU_8]
    assert _affinity(decode) == [GPU_24]


@pytest.mark.parametrize("stack_name", ["cross-server", "same-server"])
def test_disaggregated_workers_use_nixl_over_tcp_with_cpu_buffers(stack_name):
    comps = components(run_stack(stack_name))
    for name, role_json, mode in (("prefill", PRODUCER, "prefill"), ("decode", CONSUMER, "decode")):
        main = main_container(comps[name])
        assert main["command"] == ["python3", "-m", "dynamo.vllm"]
        args = main["args"]
        assert flag(args, "--model") == "Qwen/Qwen3-0.6B"
        assert flag(args, "--disaggregation-mode") == mode
        assert flag(args, "--kv-transfer-config") == role_json
        assert _env(main) == {"UCX_TLS": "tcp,self", "UCX_RNDV_THRESH": "inf",
                              "HF_HUB_CACHE": "/cache/huggingface/hub", "HF_HUB_OFFLINE": "1"}
        # The sizing rests on 16-token blocks and a context the pool holds (2,371 + 64 tokens, block-aligned).
        assert (flag(args, "--block-size"), flag(args, "--max-model-len")) == ("16", "2448")
        assert flag(args, "--revision") == "c1899de289a04d12100db370d81485cdf75e47ca"
        limits = main["resources"]["limits"]
        assert limits["nvidia.com/gpu"] == "1"
    # The KV router learns prefill workers' caches from their KV events; decode workers do not publish.
    prefill_args = main_container(comps["prefill"])["args"]
    events = json.loads(flag(prefill_args, "--kv-events-config"))
    assert events["publisher"] == "zmq" and events["enable_kv_cache_events"] is True
    assert "--kv-events-config" not in main_container(comps["decode"])["args"]


def test_same_server_runs_two_plus_two_on_the_24gb_node():
    comps = components(run_stack("same-server"))
    assert {n: (c["type"], c["replicas"]) for n, c in comps.items() if n != "frontend"} == {
        "prefill": ("prefill", 2), "decode": ("decode", 2)}
    assert _affinity(comps["prefill"]) == _affinity(comps["decode"]) == [GPU_24]
    for name in ("prefill", "decode"):
        assert main_container(comps[name])["resources"]["limits"]["memory"] == "10240Mi"


def test_kv_routing_runs_six_aggregated_workers_four_plus_two():
    comps = components(run_stack("kv-routing"))
    workers = {n: c for n, c in comps.items() if n != "frontend"}
    assert {c["type"] for c in workers.values()} == {"worker"}
    assert sum(c["replicas"] for c in workers.values()) == 6
    assert workers["worker-24gb"]["replicas"] == 4
    assert workers["worker-8gb"]["replicas"] == 2
    assert _affinity(workers["worker-24gb"]) == [GPU_24]
    assert _affinity(workers["worker-8gb"]) == [GPU_8]
    for comp in workers.values():
        main = main_container(comp)
        assert flag(main["args"], "--disaggregation-mode") == "agg"
        assert "--kv-transfer-config" not in main["args"]
        assert "--kv-events-config" in main["args"]
        assert not {"UCX_TLS", "UCX_RNDV_THRESH"} & set(_env(main))  # aggregated workers transfer no KV
        assert main["resources"]["limits"]["memory"] == "3584Mi"


def test_outputs_give_the_frontend_url_port_forward_and_placement():
    out = run_stack("cross-server").outputs
    assert out["graphNamespace"] == "dynamo-lab-cross-server"
    assert out["graphName"] == "cross-server"
    assert out["frontendUrl"] == "http://cross-server-frontend.dynamo-lab-cross-server.svc.cluster.local:8000"
    assert out["portForward"] == ("kubectl --context dynamo-lab port-forward -n dynamo-lab-cross-server "
                                  "svc/cross-server-frontend 8000:8000")
    assert out["placement"]["prefill"].startswith("1 x prefill on gpu-8gb")
    assert out["placement"]["decode"].startswith("2 x decode on gpu-24gb")
    assert out["sizing"]["kv_bytes_per_token"] == 114_688


def test_the_namespaces_a_stack_creates_carry_its_name():
    # `dynamo-lab preflight` tells a namespace this stack may reuse from one it would take over by it.
    run = run_stack("cross-server")
    labels = {r.inputs["metadata"]["name"]: r.inputs["metadata"].get("labels")
              for r in run.of_type("kubernetes:core/v1:Namespace")}
    assert {ns: ls["dynamo-lab/stack"] for ns, ls in labels.items()} == {
        "dynamo-lab-cross-server": "cross-server", "dynamo-system": "cross-server"}


def test_platform_management_off_deploys_only_the_graph():
    run = run_stack("cross-server", lambda c: c.update(platform={"manage": False}))
    assert run.of_type(RELEASE) == []
    pv, pvc = "kubernetes:core/v1:PersistentVolume", "kubernetes:core/v1:PersistentVolumeClaim"
    # Per GPU node: the model cache's volume and claim, and its pre-pull Job.
    assert sorted(r.type for r in run.resources if r.custom) == sorted([
        "pulumi:providers:kubernetes", "kubernetes:core/v1:Namespace", pv, pvc, pv, pvc, JOB, JOB, DGD])
    (dgd,) = run.of_type(DGD)
    assert all("platform" not in dep for dep in dgd.dependencies)


def test_hf_token_is_a_secret_in_the_graph_namespace_created_before_the_graph():
    run = run_stack("cross-server", lambda c: c.update(hfToken="hf_not_a_real_token"), ["dynamo-lab:hfToken"])
    (secret,) = run.of_type("kubernetes:core/v1:Secret")
    assert secret.inputs["metadata"]["name"] == "hf-token"
    assert secret.inputs["metadata"]["namespace"] == "dynamo-lab-cross-server"
    (dgd,) = run.of_type(DGD)
    assert secret.urn in dgd.dependencies
    # Which pods read it: tests/infra/manifests/test_security.py.


def test_extra_vllm_args_are_appended():
    def edit(c):
        c["workers"][1]["extraArgs"] = ["--max-num-seqs", "16"]
    comps = components(run_stack("cross-server", edit))
    assert main_container(comps["decode"])["args"][-2:] == ["--max-num-seqs", "16"]


def test_stacks_sharing_a_cluster_declare_no_common_object_except_the_platform():
    """Switching variants with platform management off in all but one stack must not collide."""
    seen = {}
    for stack in STACKS:
        run = run_stack(stack, lambda c: c.update(platform={"manage": False}))
        for r in run.resources:
            if r.custom and r.type.startswith("kubernetes:"):
                key = (r.inputs["kind"], r.inputs["metadata"].get("namespace"), r.inputs["metadata"]["name"])
                assert key not in seen, f"{stack} and {seen.get(key)} both declare {key}"
                seen[key] = stack

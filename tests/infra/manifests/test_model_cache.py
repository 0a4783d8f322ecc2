"""The model cache under mocks: each mode's volumes, mounts and env, the pre-pull Jobs the graph waits
for, the claim, the sizing, and the refusals."""

from __future__ import annotations

import pytest

from tests.helpers import DGD, JOB, ROOT, components, main_container, refused, run_stack, sized

PVC = "kubernetes:core/v1:PersistentVolumeClaim"
IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.2"
CACHE = "/cache/huggingface/hub"
HOST_DIR = "/var/lib/dynamo-lab/hf-cache"


def _host_dir(stack, root=HOST_DIR):
    """Each stack's own directory under the cache root: no other stack's Jobs write into it."""
    return f"{root}/dynamo-lab-cache.dynamo-lab-{stack}"
GPU_24 = [{"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["20000"]}]
GPU_8 = [{"key": "nvidia.com/gpu.memory", "operator": "Lt", "values": ["12000"]}]
# Qwen/Qwen3-0.6B's files at Hub revision c1899de: model.safetensors holds 751,632,384 bf16 parameters.
WEIGHTS = 751_632_384 * 2
TOKENIZER = 15_882_037


def _run(stack, cache=None, **more):
    def edit(c):
        if cache is not None:
            c["modelCache"] = cache
        c.update(more)
    return run_stack(stack, edit, ["dynamo-lab:hfToken"] if "hfToken" in more else None)


def _pulls(run):
    return {r.name: r.inputs for r in run.of_type(JOB) if r.name.startswith("graph-model-cache-pull")}


def _expr(job):
    aff = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    return aff["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]


def _env(container):
    return {e["name"]: e["value"] for e in container.get("env", [])}


def _workers(run):
    return {n: c for n, c in components(run).items() if n != "frontend"}


def _refusal(stack, cache, **more) -> str:
    def edit(c):
        c["modelCache"] = cache
        c.update(more)
    return str(refused(stack, edit))


PV = "kubernetes:core/v1:PersistentVolume"
HOSTPATH = {"mode": "hostPath"}


def _claim_volume(claim):
    return [{"name": "model-cache", "persistentVolumeClaim": {"claimName": claim}}]


# --- nodeVolume, the default: a directory on each GPU node behind a PersistentVolume -------------


def test_by_default_every_worker_mounts_its_nodes_cache_claim_read_only(stack):
    run = run_stack(stack)
    classes = {g.name: g.gpu_class for g in sized(stack)[0].workers}
    for name, comp in _workers(run).items():
        main, spec = main_container(comp), comp["podTemplate"]["spec"]
        assert _env(main)["HF_HUB_CACHE"] == CACHE, name
        # Pre-pulled: no Hub call at start, so neither an outage nor a moved branch changes a worker.
        assert _env(main)["HF_HUB_OFFLINE"] == "1", name
        # Read-only: once pulled, no worker can change what another loads.
        assert main["volumeMounts"] == [{"name": "model-cache", "mountPath": CACHE, "readOnly": True}]
        # A claim, not a hostPath: the namespace can enforce Pod Security baseline.
        assert spec["volumes"] == _claim_volume(f"{stack}-model-cache-{classes[name]}")
    # The frontend reads the config and tokenizer from a worker (Dynamo's self-hosted metadata).
    frontend = components(run)["frontend"]
    assert "volumeMounts" not in main_container(frontend)
    assert "volumes" not in frontend["podTemplate"]["spec"]


def test_each_gpu_node_gets_a_volume_on_its_directory_and_a_claim_bound_to_it():
    run = run_stack("cross-server")
    volumes = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in run.of_type(PV)}
    assert sorted(volumes) == ["dynamo-lab-cross-server-model-cache-gpu-24gb",
                               "dynamo-lab-cross-server-model-cache-gpu-8gb"]
    claims = {r.inputs["metadata"]["name"]: r for r in run.of_type(PVC)}
    by_urn = {r.urn: r.name for r in run.resources}
    for cls, rule in (("gpu-24gb", GPU_24), ("gpu-8gb", GPU_8)):
        pv = volumes[f"dynamo-lab-cross-server-model-cache-{cls}"]
        # The kubelet makes the stack's own directory; the files outlive `pulumi destroy`.
        assert pv["hostPath"] == {"path": _host_dir("cross-server"), "type": "DirectoryOrCreate"}
        assert pv["persistentVolumeReclaimPolicy"] == "Retain"
        assert pv["nodeAffinity"]["required"]["nodeSelectorTerms"] == [{"matchExpressions": rule}]
        assert pv["claimRef"] == {"name": f"cross-server-model-cache-{cls}", "namespace": "dynamo-lab-cross-server"}
        claim = claims[f"cross-server-model-cache-{cls}"]
        assert claim.inputs["metadata"]["namespace"] == "dynamo-lab-cross-server"
        assert claim.inputs["spec"]["volumeName"] == f"dynamo-lab-cross-server-model-cache-{cls}"
        assert claim.inputs["spec"]["storageClassName"] == ""  # bound to that volume, never provisioned
        assert f"graph-model-cache-volume-{cls}" in {by_urn[d] for d in claim.dependencies}
    (dgd,) = run.of_type(DGD)
    assert {c.urn for c in claims.values()} <= set(dgd.dependencies)


def test_a_pre_pull_job_per_gpu_node_downloads_the_model_and_the_graph_waits_for_them():
    run = run_stack("cross-server")
    pulls = _pulls(run)
    assert sorted(pulls) == ["graph-model-cache-pull-gpu-24gb", "graph-model-cache-pull-gpu-8gb"]
    assert _expr(pulls["graph-model-cache-pull-gpu-8gb"]) == GPU_8
    assert _expr(pulls["graph-model-cache-pull-gpu-24gb"]) == GPU_24
    digests = set()
    for job in pulls.values():
        meta, spec = job["metadata"], job["spec"]
        assert meta["namespace"] == "dynamo-lab-cross-server"
        # No pulumi.com/skipAwait: Pulumi waits for it to complete; a failed one is replaced next `up`.
        assert meta["annotations"] == {"pulumi.com/replaceUnready": "true"}
        assert spec["activeDeadlineSeconds"] == 1800 and spec["backoffLimit"] == 2
        pod = spec["template"]["spec"]
        assert pod["restartPolicy"] == "Never"
        cls = meta["name"].split("model-pull-")[1].rsplit("-", 1)[0]
        assert pod["volumes"] == _claim_volume(f"cross-server-model-cache-{cls}")
        assert pod["automountServiceAccountToken"] is False
        (prepare,) = pod["initContainers"]
        # The one root step: the kubelet's directory is root's, and fsGroup does not reach a hostPath
        # (nor the hostPath behind the node's volume).
        assert prepare["securityContext"]["runAsUser"] == 0
        assert prepare["securityContext"]["allowPrivilegeEscalation"] is False
        assert prepare["command"][-1].startswith(f"chgrp 0 {CACHE} && chmod g+rwxs {CACHE}")
        (pull,) = pod["containers"]
        assert pull["image"] == IMAGE
        assert pull["command"][:2] == ["python3", "-c"] and "snapshot_download" in pull["command"][2]
        # The pinned revision the sizing's file sizes come from, the one the workers load.
        assert pull["command"][3:6] == ["Qwen/Qwen3-0.6B", "c1899de289a04d12100db370d81485cdf75e47ca",
                                        "*.safetensors"]
        assert _env(pull) == {"HF_HUB_CACHE": CACHE}
        assert pull["volumeMounts"] == [{"name": "model-cache", "mountPath": CACHE}]
        assert pull["resources"] == {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "4Gi"}}
        assert "envFrom" not in pull  # no token configured
        digests.add(meta["name"].rsplit("-", 1)[1])
    assert len(digests) == 1
    (dgd,) = run.of_type(DGD)
    jobs = [r for r in run.of_type(JOB) if r.name.startswith("graph-model-cache-pull")]
    assert {j.urn for j in jobs} <= set(dgd.dependencies)
    assert run.outputs["modelPullJobs"] == [pulls[f"graph-model-cache-pull-{c}"]["metadata"]["name"]
                                            for c in ("gpu-8gb", "gpu-24gb")]


def test_the_model_cache_component_owns_the_jobs_under_the_serving_graph():
    run = run_stack("kv-routing")
    by_name = {r.name: r for r in run.resources}
    cache = by_name["graph-model-cache"]
    assert cache.type == "dynamo-lab:index:ModelCache"
    assert cache.parent == by_name["graph"].urn
    for job in (r for r in run.of_type(JOB) if r.name.startswith("graph-model-cache-pull")):
        assert job.parent == cache.urn
        assert by_name["graph-ns"].urn in job.dependencies


def test_a_single_node_stack_pulls_on_that_node_only():
    (job,) = _pulls(run_stack("same-server")).values()
    assert _expr(job) == GPU_24
    assert job["metadata"]["name"].startswith("same-server-model-pull-gpu-24gb-")


def test_the_pre_pull_reads_the_token_secret_when_one_is_set():
    run = _run("cross-server", hfToken="hf_not_a_real_token")
    (secret,) = run.of_type("kubernetes:core/v1:Secret")
    for job in run.of_type(JOB):
        (pull,) = job.inputs["spec"]["template"]["spec"]["containers"]
        assert pull["envFrom"] == [{"secretRef": {"name": "hf-token"}}]
        assert secret.urn in job.dependencies


def test_a_changed_model_or_image_downloads_again_and_nothing_else_does():
    def names(**more):
        return sorted(j["metadata"]["name"] for j in _pulls(_run("cross-server", **more)).values())

    first = names()
    assert names() == first
    assert not set(names(image="nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.3")) & set(first)
    other_model = {"name": "Qwen/Qwen3-1.7B", "layers": 28, "kvHeads": 8, "headDim": 128,
                   "parameters": 1_720_574_976}
    assert not set(names(model=other_model)) & set(first)


def test_without_pre_pull_there_is_no_job_and_workers_still_mount_the_cache():
    run = _run("cross-server", {"prePull": {"enabled": False}})
    assert _pulls(run) == {} and "modelPullJobs" not in run.outputs
    assert len(run.of_type(PV)) == 2  # the volumes stay: the workers download into them
    for comp in _workers(run).values():
        assert "readOnly" not in main_container(comp)["volumeMounts"][0]
        assert "HF_HUB_OFFLINE" not in _env(main_container(comp))


def test_the_host_directory_and_timeout_are_configurable():
    run = _run("same-server", {"hostPath": "/data/hf", "prePull": {"timeoutSeconds": 600}})
    (job,) = _pulls(run).values()
    assert job["spec"]["activeDeadlineSeconds"] == 600
    (pv,) = run.of_type(PV)
    assert pv.inputs["spec"]["hostPath"]["path"] == _host_dir("same-server", "/data/hf")


# --- hostPath: the directory mounted into the pods (a privileged namespace) -----------------------


def test_a_hostpath_cache_is_mounted_into_every_worker_and_pull_job(stack):
    run = _run(stack, HOSTPATH)
    assert run.of_type(PV) == [] and run.of_type(PVC) == []
    for name, comp in _workers(run).items():
        main, spec = main_container(comp), comp["podTemplate"]["spec"]
        assert main["volumeMounts"] == [{"name": "model-cache", "mountPath": CACHE, "readOnly": True}]
        # Directory, not DirectoryOrCreate: the pre-pull Job made it, writable by the image's group.
        assert spec["volumes"] == [{"name": "model-cache",
                                    "hostPath": {"path": _host_dir(stack), "type": "Directory"}}], name
    for job in _pulls(run).values():
        assert job["spec"]["template"]["spec"]["volumes"] == [
            {"name": "model-cache", "hostPath": {"path": _host_dir(stack), "type": "DirectoryOrCreate"}}]


def test_without_pre_pull_a_hostpath_cache_has_no_job_and_workers_need_the_directory():
    run = _run("cross-server", {"mode": "hostPath", "prePull": {"enabled": False}})
    assert _pulls(run) == {} and "graph-model-cache" not in {r.name for r in run.resources}
    for comp in _workers(run).values():
        assert comp["podTemplate"]["spec"]["volumes"][0]["hostPath"]["type"] == "Directory"


# --- off ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["off", False])  # YAML 1.1 reads an unquoted `off` as false
def test_off_mounts_nothing_and_pulls_nothing(mode):
    run = _run("kv-routing", {"mode": mode})
    assert _pulls(run) == {} and run.of_type(PVC) == []
    for comp in components(run).values():
        assert "volumes" not in comp["podTemplate"]["spec"]
        main = main_container(comp)
        assert "volumeMounts" not in main and "HF_HUB_CACHE" not in _env(main)
    assert run.outputs["sizing"]["model_cache"]["downloads"] == 6  # every worker pod downloads


# --- a PersistentVolumeClaim --------------------------------------------------------------------


def test_a_new_claim_is_created_filled_once_and_mounted_everywhere():
    run = _run("kv-routing", {"mode": "pvc", "pvc": {"storageClass": "nfs-client", "size": "20Gi"}})
    (claim,) = run.of_type(PVC)
    assert claim.inputs == {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "kv-routing-model-cache", "namespace": "dynamo-lab-kv-routing"},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "20480Mi"}},
                 "storageClassName": "nfs-client"}}
    volume = {"name": "model-cache", "persistentVolumeClaim": {"claimName": "kv-routing-model-cache"}}
    (job,) = _pulls(run).values()
    assert "affinity" not in job["spec"]["template"]["spec"]  # ReadWriteMany: any node
    assert job["spec"]["template"]["spec"]["volumes"] == [volume]
    for comp in _workers(run).values():
        assert comp["podTemplate"]["spec"]["volumes"] == [volume]
    assert "volumes" not in components(run)["frontend"]["podTemplate"]["spec"]
    (job_reg,) = [r for r in run.of_type(JOB)]
    assert claim.urn in job_reg.dependencies
    (dgd,) = run.of_type(DGD)
    assert {claim.urn, job_reg.urn} <= set(dgd.dependencies)
    (provider,) = run.of_type("pulumi:providers:kubernetes")
    assert claim.provider.startswith(provider.urn + "::") and job_reg.provider.startswith(provider.urn + "::")


def test_a_read_write_once_claim_on_one_node_pulls_there_and_keeps_the_frontend_off_it():
    run = _run("same-server", {"mode": "pvc", "pvc": {"accessMode": "ReadWriteOnce"}})
    (claim,) = run.of_type(PVC)
    assert claim.inputs["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert "storageClassName" not in claim.inputs["spec"]  # the cluster's default class
    (job,) = _pulls(run).values()
    assert _expr(job) == GPU_24  # a local volume binds where its first pod runs: the workers' node
    frontend = components(run)["frontend"]
    assert "volumes" not in frontend["podTemplate"]["spec"]


def test_an_existing_claim_is_mounted_and_filled_but_not_created():
    run = _run("cross-server", {"mode": "pvc", "pvc": {"claimName": "shared-models"}})
    assert run.of_type(PVC) == []
    volume = {"name": "model-cache", "persistentVolumeClaim": {"claimName": "shared-models"}}
    (job,) = _pulls(run).values()
    assert job["spec"]["template"]["spec"]["volumes"] == [volume]
    for comp in _workers(run).values():
        assert comp["podTemplate"]["spec"]["volumes"] == [volume]
    cache = run.outputs["sizing"]["model_cache"]
    assert (cache["locations"], cache["claim_bytes"], cache["downloads"]) == (["shared-models"], None, 1)


# --- sizing ---------------------------------------------------------------------------------------


def test_sizing_gives_the_disk_per_node_from_the_stored_parameters_and_tokenizer_files():
    cache = run_stack("cross-server").outputs["sizing"]["model_cache"]
    assert cache == {"mode": "nodeVolume", "stored_parameters": 751_632_384, "weights_bytes": WEIGHTS,
                     "tokenizer_bytes": TOKENIZER, "bytes_per_cache": WEIGHTS + TOKENIZER,
                     "locations": ["gpu-8gb", "gpu-24gb"], "claim_bytes": None, "downloads": 2}
    # The file on the Hub is 1,503,300,328 B: the estimate leaves out only its header (35,560 B), so it
    # is within 0.01% of the download.
    assert abs(cache["bytes_per_cache"] - (1_503_300_328 + TOKENIZER)) / cache["bytes_per_cache"] < 1e-4


# --- refusals -------------------------------------------------------------------------------------


def test_a_relative_host_path_is_refused():
    assert _refusal("cross-server", {"hostPath": "hf-cache"}) == (
        "Pulumi.cross-server.yaml: modelCache.hostPath: 'hf-cache' is not an absolute path; the cache is "
        "the same directory on every GPU node, named from the node's root. Write an absolute path, e.g. "
        "/var/lib/dynamo-lab/hf-cache")


def test_a_host_path_with_dot_dot_is_refused():
    assert "modelCache.hostPath: '/var/../hf' contains '..', and the API server rejects" in _refusal(
        "cross-server", {"hostPath": "/var/../hf"})


def test_read_write_once_with_workers_on_two_nodes_is_refused():
    assert _refusal("cross-server", {"mode": "pvc", "pvc": {"accessMode": "ReadWriteOnce"}}) == (
        "Pulumi.cross-server.yaml: modelCache.pvc.accessMode: ReadWriteOnce lets one node mount the claim, "
        "but the workers run on 2 nodes (gpu-8gb: prefill; gpu-24gb: decode); the pods on the other node "
        "would never start. Write accessMode: ReadWriteMany (a storage class that supports it, e.g. NFS), "
        "or use mode: hostPath (a directory on each node)")


def test_a_claim_smaller_than_the_model_is_refused_with_the_size_to_write():
    assert _refusal("kv-routing", {"mode": "pvc", "pvc": {"size": "1Gi"}}) == (
        "Pulumi.kv-routing.yaml: modelCache.pvc.size: 1.0Gi is below the 1.4Gi (1,519,146,805 B) the model "
        "cache holds: Qwen/Qwen3-0.6B's weights as stored, 751,632,384 parameters x 2 B = 1,503,264,768 B, "
        "plus 15,882,037 B of config and tokenizer files; the download would fill the volume and fail. "
        "Raise modelCache.pvc.size to at least 2Gi")
    _run("kv-routing", {"mode": "pvc", "pvc": {"size": "2Gi"}})  # the size it names is accepted


def test_sizing_an_existing_claim_is_refused():
    assert _refusal("cross-server", {"mode": "pvc", "pvc": {"claimName": "models", "size": "5Gi"}}) == (
        "Pulumi.cross-server.yaml: modelCache.pvc.size: size describes a claim dynamo-lab creates, but claimName "
        "names an existing one, which it does not change. Remove size, or remove claimName to have a claim "
        "created")
    # Both are the section's to settle, not one key's.
    assert _refusal("cross-server", {"mode": "pvc", "pvc": {"claimName": "models", "size": "5Gi",
                                                            "storageClass": "fast"}}).startswith(
        "Pulumi.cross-server.yaml: modelCache.pvc: storageClass and size describe a claim dynamo-lab creates")


def test_an_unknown_mode_lists_the_modes():
    assert _refusal("cross-server", {"mode": "none"}) == (
        "Pulumi.cross-server.yaml: modelCache.mode: 'none' is not allowed; write one of 'off', 'nodeVolume', "
        "'hostPath' or 'pvc'")


def test_the_model_cache_page_shows_the_refusals_as_the_program_words_them():
    readme = (ROOT / "docs" / "model-cache.md").read_text()
    for message in (_refusal("cross-server", {"hostPath": "hf-cache"}),
                    _refusal("cross-server", {"mode": "pvc", "pvc": {"accessMode": "ReadWriteOnce"}}),
                    _refusal("kv-routing", {"mode": "pvc", "pvc": {"size": "1Gi"}})):
        assert message in readme, "docs/model-cache.md's refusals are stale"

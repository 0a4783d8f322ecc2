"""A bad stack file fails before anything is registered, naming the file, the key, why and the fix."""

from __future__ import annotations

import pytest

from infra.errors import ConfigError
from tests.helpers import refused

F = "Pulumi.cross-server.yaml"


def _error(edit) -> ConfigError:
    return refused("cross-server", edit)


def test_misspelled_top_level_key_names_the_key_the_file_and_the_right_key():
    err = _error(lambda c: c.update(worker=c.pop("workers")))
    assert (f"{F}: worker: unknown key `dynamo-lab:worker`; did you mean `dynamo-lab:workers`? Valid keys "
            "here: gpuClasses, platform, model, image, frontend, graph, workers, workload, sizing, probe, "
            "benchmark, "
            "modelCache, "
            "hfToken."
            ) in str(err).splitlines()


def test_misspelled_nested_key():
    err = _error(lambda c: c["workers"][0].update(replica=2))
    assert f"{F}: workers.prefill.replica: unknown key `replica`; did you mean `replicas`?" in str(err)


def test_unknown_gpu_class():
    err = _error(lambda c: c["workers"][0].update(gpuClass="gpu-8g"))
    assert str(err) == (f"{F}: workers.prefill.gpuClass: unknown GPU class 'gpu-8g'; did you mean "
                        "'gpu-8gb'? Defined classes (add one under gpuClasses): gpu-24gb, gpu-8gb")


def test_prefill_without_decode():
    err = _error(lambda c: c.update(workers=[c["workers"][0]]))
    assert str(err) == (f"{F}: workers: a disaggregated graph needs both prefill and decode groups; this "
                        "one has prefill but no decode. Add a group with role: decode")


def test_decode_without_prefill():
    err = _error(lambda c: c.update(workers=[c["workers"][1]]))
    assert "this one has decode but no prefill. Add a group with role: prefill" in str(err)


def test_agg_mixed_with_disaggregated_groups():
    err = _error(lambda c: c["workers"].append(
        {"name": "agg", "role": "agg", "replicas": 1, "gpuClass": "gpu-24gb"}))
    assert f"{F}: workers: agg groups (agg) are mixed with prefill/decode groups in one graph" in str(err)


def test_cuda_buffers_over_tcp_only_transport():
    err = _error(lambda c: c["workers"][0].update(kvTransfer={"bufferDevice": "cuda"}))
    assert str(err).startswith(
        f"{F}: workers.prefill.kvTransfer.bufferDevice: cuda buffers over UCX_TLS=tcp,self (TCP only) "
        "crash UCX copying GPU memory over TCP (segfault in uct_tcp_ep_am_bcopy). Write bufferDevice: cpu")


def test_negative_replicas():
    err = _error(lambda c: c["workers"][1].update(replicas=-1))
    assert str(err) == f"{F}: workers.decode.replicas: -1 is not allowed: write a number >= 0"


@pytest.mark.parametrize("tag", ["latest", "1.6", "v1.6.2-", "main"])
def test_image_tag_that_is_not_semver(tag):
    err = _error(lambda c: c.update(image=f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{tag}"))
    assert f"{F}: image: image tag {tag} is not a semantic version" in str(err)
    assert "After: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.2" in str(err)


def test_unknown_role_lists_the_roles():
    err = _error(lambda c: c["workers"][1].update(role="decoder"))
    assert str(err) == f"{F}: workers.decode.role: 'decoder' is not allowed; write one of 'agg', 'prefill' or 'decode'"


def test_bad_quantity_shows_the_accepted_forms():
    err = _error(lambda c: c["workers"][1].update(memoryLimit="lots"))
    assert "workers.decode.memoryLimit: 'lots' is not a Kubernetes quantity" in str(err)
    assert "3584Mi, 10Gi" in str(err)


def test_managed_flags_are_refused_in_extra_args():
    err = _error(lambda c: c["workers"][1].update(extraArgs=["--kv-transfer-config={}"]))
    assert "--kv-transfer-config is written by dynamo-lab from `kvTransfer`" in str(err)


def test_unknown_model_needs_its_geometry():
    err = _error(lambda c: c.update(model={"name": "org/other-model"}))
    assert "missing layers, kvHeads, headDim, parameters" in str(err)


def test_removed_top_level_chart_keys_are_refused():
    err = _error(lambda c: c.update(platform={"values": {"grove": {"enabled": False}}}))
    assert ("platform.values: `grove.enabled` was removed from the dynamo-platform chart and makes it "
            "fail; use global.grove.install / global.grove.enabled instead") in str(err)


def test_every_schema_problem_is_reported_at_once():
    def edit(c):
        c["workers"][0]["role"] = "prefiller"
        c["workers"][1]["replicas"] = -2
        c["frontend"] = {"routerMode": "fastest"}
    err = _error(edit)
    assert sorted(p for p, _ in err.problems) == ["frontend.routerMode", "workers.decode.replicas",
                                                  "workers.prefill.role"]
    assert len(str(err).splitlines()) == 3


def test_every_cross_key_problem_is_reported_at_once():
    def edit(c):
        c["workers"][0]["gpuClass"] = "nope"
        c["probe"] = {"toGroup": "prefill"}
        c["graph"] = {"namespace": "dynamo-system"}
    err = _error(edit)
    assert [p for p, _ in err.problems] == ["workers.prefill.gpuClass", "probe.toGroup", "graph.namespace"]


def test_schema_problems_come_first_and_alone():
    # Cross-key checks need a well-typed config: with a schema problem they do not run, so the user
    # fixes the types first and then sees the rest (the unknown class is not reported yet).
    def edit(c):
        c["workers"][0]["gpuClass"] = "nope"
        c["workers"][1]["replicas"] = -2
    err = _error(edit)
    assert [p for p, _ in err.problems] == ["workers.decode.replicas"]


def test_graph_names_must_be_dns_labels():
    err = _error(lambda c: c.update(graph={"namespace": "Dynamo_Lab"}))
    assert "graph.namespace: 'Dynamo_Lab' is not a DNS label" in str(err)

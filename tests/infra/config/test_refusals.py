"""Stack-file mistakes in keys, names and references: misspelled keys, unknown classes and roles, a
value of the wrong type, every problem at once, and names that must point at something, each refused
with the file, the key and the fix, and nothing registered."""

from __future__ import annotations

import pytest

from tests.helpers import refused
from tests.infra.config.refusing import F, refusal, refused_text

# --- names that point at something resolve ------------------------------------------------------

@pytest.mark.parametrize("measured, message", [
    ({"fromGroup": "prefil", "toGroup": "decode", "bytesPerSecond": "119M"},
     "sizing.measured[0].fromGroup: unknown prefill group 'prefil'; did you mean 'prefill'? a measured throughput "
     "belongs to a prefill -> decode path. Prefill groups: prefill"),
    ({"fromGroup": "prefill", "toGroup": "prefill", "bytesPerSecond": "119M"},
     "sizing.measured[0].toGroup: 'prefill' is a prefill group, not a decode group"),
])
def test_a_measured_throughput_for_a_group_that_does_not_exist_is_refused(measured, message):
    assert f"{F}: {message}" in refused_text(lambda c: c.update(sizing={"measured": [measured]}))


def test_probe_groups_resolve_with_did_you_mean():
    msg = refused_text(lambda c: c.update(probe={"enabled": True, "toGroup": "decod"}))
    assert f"{F}: probe.toGroup: unknown decode group 'decod'; did you mean 'decode'?" in msg


# --- keys, names and references ------------------------------------------------------------------

@pytest.mark.parametrize("edit, message", [
    # A worker's key written two spaces deep, level with `dynamo-lab:workers:` instead of under a worker.
    (lambda c: c.update(kvCacheBytes=c["workers"][0].pop("kvCacheBytes")),
     "kvCacheBytes: unknown key `dynamo-lab:kvCacheBytes`; it is a key of `workers`: indent it under that "
     "section, level with the keys beside it there. Valid keys here: "),
    # A workload key left under the section above it.
    (lambda c: c.update(model={"name": "Qwen/Qwen3-0.6B", "inputTokens": 4000}),
     "model.inputTokens: unknown key `inputTokens`; it is a key of `workload`: indent it under that section"),
    (lambda c: c.update(name="Qwen/Qwen3-0.6B"),
     "name: unknown key `dynamo-lab:name`; it is a key of `model`, `graph` or `workers`: indent it under the one "
     "you meant"),
])
def test_a_key_at_the_wrong_depth_names_the_section_it_belongs_to(edit, message):
    assert f"{F}: {message}" in str(refusal(edit))


def test_misspelled_top_level_key_names_the_key_the_file_and_the_right_key():
    err = refusal(lambda c: c.update(worker=c.pop("workers")))
    assert (f"{F}: worker: unknown key `dynamo-lab:worker`; did you mean `dynamo-lab:workers`? Valid keys "
            "here: gpuClasses, platform, model, image, frontend, graph, workers, workload, sizing, probe, "
            "benchmark, "
            "modelCache, "
            "hfToken."
            ) in str(err).splitlines()


def test_misspelled_nested_key():
    err = refusal(lambda c: c["workers"][0].update(replica=2))
    assert f"{F}: workers.prefill.replica: unknown key `replica`; did you mean `replicas`?" in str(err)


def test_unknown_gpu_class():
    err = refusal(lambda c: c["workers"][0].update(gpuClass="gpu-8g"))
    assert str(err) == (f"{F}: workers.prefill.gpuClass: unknown GPU class 'gpu-8g'; did you mean "
                        "'gpu-8gb'? Defined classes (add one under gpuClasses): gpu-24gb, gpu-8gb")


@pytest.mark.parametrize("stack", ["cross-server", "kv-routing"])
@pytest.mark.parametrize("typo", ["gpu-24gb ", "GPU-24gb", "gpu_24gb"])
def test_a_gpu_class_typo_is_one_error_not_a_second_about_a_class_never_defined(stack, typo):
    # A worker's misspelled class that is not a DNS label: the node cache's claim check must not
    # report it as if it were a class of gpuClasses.
    err = refused(stack, lambda c: c["workers"][0].update(gpuClass=typo))
    assert [p.endswith(".gpuClass") for p, _ in err.problems] == [True]
    assert f"unknown GPU class {typo!r}; did you mean 'gpu-24gb'?" in str(err)


def test_prefill_without_decode():
    err = refusal(lambda c: c.update(workers=[c["workers"][0]]))
    assert str(err) == (f"{F}: workers: a disaggregated graph needs both prefill and decode groups; this "
                        "one has prefill but no decode. Add a group with role: decode")


def test_decode_without_prefill():
    err = refusal(lambda c: c.update(workers=[c["workers"][1]]))
    assert "this one has decode but no prefill. Add a group with role: prefill" in str(err)


def test_agg_mixed_with_disaggregated_groups():
    err = refusal(lambda c: c["workers"].append(
        {"name": "agg", "role": "agg", "replicas": 1, "gpuClass": "gpu-24gb"}))
    assert f"{F}: workers: agg groups (agg) are mixed with prefill/decode groups in one graph" in str(err)


def test_cuda_buffers_over_tcp_only_transport():
    err = refusal(lambda c: c["workers"][0].update(kvTransfer={"bufferDevice": "cuda"}))
    assert str(err).startswith(
        f"{F}: workers.prefill.kvTransfer.bufferDevice: cuda buffers over UCX_TLS=tcp,self (TCP only) "
        "crash UCX copying GPU memory over TCP (segfault in uct_tcp_ep_am_bcopy). Write bufferDevice: cpu")


def test_negative_replicas():
    err = refusal(lambda c: c["workers"][1].update(replicas=-1))
    assert str(err) == f"{F}: workers.decode.replicas: -1 is not allowed: write a number >= 0"


def test_a_word_for_a_number_gets_the_house_message_not_the_validators_text():
    err = refusal(lambda c: c["workers"][1].update(replicas="two"))
    assert str(err) == (f"{F}: workers.decode.replicas: 'two' is not a whole number; write it in digits, "
                        "e.g. `replicas: 2`")


@pytest.mark.parametrize("edit, message", [
    (lambda c: c["workers"][0].update(replicas=1.5), "workers.prefill.replicas: 1.5 is not a whole number"),
    (lambda c: c.update(graph={"networkPolicy": "maybe"}),
     "graph.networkPolicy: 'maybe' is not true or false; write `networkPolicy: true` or `networkPolicy: false`"),
    (lambda c: c.update(benchmark={"concurrency": "4,8"}), "benchmark.concurrency: '4,8' is not a list"),
    (lambda c: c.update(platform={"values": "x"}), "platform.values: 'x' is not a map"),
    (lambda c: c.update(model="Qwen/Qwen3-0.6B"),
     "model: 'Qwen/Qwen3-0.6B' is not a map; write `key: value` pairs indented under `model:`"),
    (lambda c: c.update(workload=4000),
     "workload: '4000' is not a map; write `key: value` pairs indented under `workload:`"),
    (lambda c: c["workers"][0].update(extraArgs="--max-num-seqs"),
     "workers.prefill.extraArgs: '--max-num-seqs' is not a list"),
    (lambda c: c.update(gpuClasses={"a": {"memory": "1Gi", "effectiveTflops": "fast", "nodeSelector": []}}),
     "gpuClasses.a.effectiveTflops: 'fast' is not a number"),
    (lambda c: c.update(gpuClasses={"a": {"memory": "1Gi", "effectiveTflops": 1, "nodeSelector": []}}),
     "gpuClasses.a.nodeSelector: [] has 0 items; it needs at least 1"),
])
def test_a_value_of_the_wrong_type_says_what_to_write(edit, message):
    text = str(refusal(edit))
    assert f"{F}: {message}" in text
    assert "Input should" not in text


@pytest.mark.parametrize("tag", ["latest", "1.6", "v1.6.2-", "main"])
def test_image_tag_that_is_not_semver(tag):
    err = refusal(lambda c: c.update(image=f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{tag}"))
    assert f"{F}: image: image tag {tag} is not a semantic version" in str(err)
    assert "After: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.2" in str(err)


def test_unknown_role_lists_the_roles():
    err = refusal(lambda c: c["workers"][1].update(role="decoder"))
    assert str(err) == f"{F}: workers.decode.role: 'decoder' is not allowed; write one of 'agg', 'prefill' or 'decode'"


def test_bad_quantity_shows_the_accepted_forms():
    err = refusal(lambda c: c["workers"][1].update(memoryLimit="lots"))
    assert "workers.decode.memoryLimit: 'lots' is not a Kubernetes quantity" in str(err)
    assert "3584Mi, 10Gi" in str(err)


def test_managed_flags_are_refused_in_extra_args():
    err = refusal(lambda c: c["workers"][1].update(extraArgs=["--kv-transfer-config={}"]))
    assert "'--kv-transfer-config=...' sets --kv-transfer-config, which dynamo-lab writes itself" in str(err)


def test_unknown_model_needs_its_geometry():
    err = refusal(lambda c: c.update(model={"name": "org/other-model"}))
    assert "missing layers, kvHeads, headDim, parameters" in str(err)


def test_a_built_in_model_in_another_letter_case_is_named_as_the_catalogue_spells_it():
    err = refusal(lambda c: c.update(model={"name": "qwen/qwen3-0.6b"}))
    assert str(err) == (
        "Pulumi.cross-server.yaml: model.name: model 'qwen/qwen3-0.6b' is not built in, but 'Qwen/Qwen3-0.6B' is (the "
        "letter case differs, and it counts: the name is the Hugging Face repository vLLM downloads and the model "
        "the frontend serves). Write name: Qwen/Qwen3-0.6B, or give this model's geometry: layers, kvHeads, "
        "headDim, parameters from its config.json and its parameter count")
    assert "but 'Qwen/Qwen3-8B' is. Write name: Qwen/Qwen3-8B" in str(
        refusal(lambda c: c.update(model={"name": "Qwen/Qwen3-8b-"})))


def _classes(requirement: dict) -> dict:
    return {"gpu-8gb": {"memory": "8Gi", "effectiveTflops": 15, "nodeSelector": [requirement]},
            "gpu-24gb": {"memory": "24Gi", "effectiveTflops": 40, "nodeSelector": [{"key": "b", "operator": "Exists"}]}}


def _agg_with_kv_transfer(c: dict) -> None:
    c["workers"][0].update(role="agg", kvTransfer={"bufferDevice": "cpu"})


# A check that reads several keys of a section but is about one of them names that one, as a
# single key's own check does: the line says where to edit.
@pytest.mark.parametrize("edit, where", [
    (lambda c: c.update(workload={"inputTokens": 512, "prefixTokens": 512}), "workload.prefixTokens: prefixTokens 512"),
    (lambda c: c.update(gpuClasses=_classes({"key": "a", "operator": "Exists", "values": ["x"]})),
     "gpuClasses.gpu-8gb.nodeSelector[0].values: operator Exists takes no values"),
    (lambda c: c.update(gpuClasses=_classes({"key": "a", "operator": "Gt", "values": ["big"]})),
     "gpuClasses.gpu-8gb.nodeSelector[0].values: operator Gt needs exactly one integer value"),
    (_agg_with_kv_transfer, "workers.prefill.kvTransfer: kvTransfer applies to prefill and decode workers only"),
    (lambda c: c.update(model={"name": "qwen/qwen3-0.6b"}), "model.name: model 'qwen/qwen3-0.6b' is not built in"),
    # a bad item of a list key: the item
    (lambda c: c.update(gpuClasses=_classes({"key": "a", "operator": "In", "values": ["ok", "no way"]})),
     "gpuClasses.gpu-8gb.nodeSelector[0].values[1]: 'no way' is not a Kubernetes label value"),
    # the benchmark Job's requirements are read by the same model
    (lambda c: c.update(benchmark={"nodeSelector": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
     "benchmark.nodeSelector[0].values: operator Exists takes no values"),
    (lambda c: c.update(modelCache={"mode": "pvc", "pvc": {"claimName": "models", "storageClass": "fast"}}),
     "modelCache.pvc.storageClass: storageClass describes a claim dynamo-lab creates, but claimName names an "
     "existing one"),
])
def test_a_section_check_about_one_key_names_that_key(edit, where):
    assert f"{F}: {where}" in refused_text(edit)


def test_removed_top_level_chart_keys_are_refused():
    err = refusal(lambda c: c.update(platform={"values": {"grove": {"enabled": False}}}))
    assert ("platform.values: `grove.enabled` was removed from the dynamo-platform chart and makes it "
            "fail; use global.grove.install / global.grove.enabled instead") in str(err)


def test_every_schema_problem_is_reported_at_once():
    def edit(c):
        c["workers"][0]["role"] = "prefiller"
        c["workers"][1]["replicas"] = -2
        c["frontend"] = {"routerMode": "fastest"}
    err = refusal(edit)
    assert sorted(p for p, _ in err.problems) == ["frontend.routerMode", "workers.decode.replicas",
                                                  "workers.prefill.role"]
    assert len(str(err).splitlines()) == 3


def test_every_cross_key_problem_is_reported_at_once():
    def edit(c):
        c["workers"][0]["gpuClass"] = "nope"
        c["probe"] = {"toGroup": "prefill"}
        c["graph"] = {"namespace": "dynamo-system"}
    err = refusal(edit)
    assert [p for p, _ in err.problems] == ["workers.prefill.gpuClass", "probe.toGroup", "graph.namespace"]


def test_schema_problems_come_first_and_alone():
    # Cross-key checks need a well-typed config: with a schema problem they do not run, so the user
    # fixes the types first and then sees the rest (the unknown class is not reported yet).
    def edit(c):
        c["workers"][0]["gpuClass"] = "nope"
        c["workers"][1]["replicas"] = -2
    err = refusal(edit)
    assert [p for p, _ in err.problems] == ["workers.decode.replicas"]


def test_graph_names_must_be_dns_labels():
    err = refusal(lambda c: c.update(graph={"namespace": "Dynamo_Lab"}))
    assert "graph.namespace: 'Dynamo_Lab' is not a DNS label" in str(err)


def test_a_gpu_class_name_the_node_cache_cannot_use_in_a_claim_name_is_refused():
    def edit(c):
        c["gpuClasses"] = {"GPU_24": {"memory": "24564Mi", "effectiveTflops": 40,
                                      "nodeSelector": [{"key": "nvidia.com/gpu.memory", "operator": "Gt",
                                                        "values": ["20000"]}]},
                           "gpu-8gb": {"memory": "8188Mi", "effectiveTflops": 15,
                                       "nodeSelector": [{"key": "nvidia.com/gpu.memory", "operator": "Lt",
                                                         "values": ["12000"]}]}}
        c["workers"][1]["gpuClass"] = "GPU_24"
    msg = refused_text(edit)
    assert msg.startswith(f"{F}: gpuClasses.GPU_24: the node cache's claim for this class would be named "
                          "'cross-server-model-cache-GPU_24', which is not a DNS label")
    assert "Rename the class, e.g. 'gpu-24'" in msg

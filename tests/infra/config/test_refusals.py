"""The mistakes people make in stack files, each refused with the file, the key and the fix, and
nothing registered. Values are read as Kubernetes, Helm, UCX and vLLM read them."""

from __future__ import annotations

import pytest

from infra.errors import ConfigError
from infra.plan import load_stack
from tests.helpers import components, flag, main_container, raw_config, refused, run_stack

F = "Pulumi.cross-server.yaml"


def _refused(edit, stack="cross-server", secret_keys=()) -> str:
    return str(refused(stack, edit, secret_keys))


def _prefill(**keys):
    return lambda c: c["workers"][0].update(keys)


def _decode(**keys):
    return lambda c: c["workers"][1].update(keys)


# --- quantities and CPU, as Kubernetes reads them -----------------------------------------------

@pytest.mark.parametrize("value, meant", [
    ("10GB", "workers.decode.memoryLimit: '10GB' is not a Kubernetes quantity; Kubernetes knows no suffix GB: "
             "10G is 10,000,000,000 bytes and 10Gi is 10,737,418,240 bytes"),
    ("10 Gi", "workers.decode.memoryLimit: '10 Gi' is not a Kubernetes quantity; Kubernetes allows no spaces in a "
              "quantity: write 10Gi (10,737,418,240 bytes)"),
    (8192, "workers.decode.memoryLimit: '8192' is 8,192 bytes (Kubernetes reads a number without a suffix as bytes), "
           "less than the 1Mi this needs; if you meant MiB, write 8192Mi (8,589,934,592 bytes)"),
    ("8Gib", "workers.decode.memoryLimit: '8Gib' is not a Kubernetes quantity; Kubernetes knows no suffix Gib: "
             "8G is 8,000,000,000 bytes and 8Gi is 8,589,934,592 bytes"),
])
def test_memory_in_a_form_kubernetes_does_not_read_is_refused_with_what_it_meant(value, meant):
    assert meant in _refused(_decode(memoryLimit=value))


def test_a_memory_value_is_passed_on_exactly_not_rounded():
    # 8500M is not whole MiB: the manifest carries exactly the bytes that were written.
    comps = components(run_stack("cross-server", _decode(memoryLimit="8500M", memoryRequest="8000001Ki")))
    resources = main_container(comps["decode"])["resources"]
    assert resources["limits"]["memory"] == "8500M"
    assert resources["requests"]["memory"] == "8000001Ki"


@pytest.mark.parametrize("edit, message", [
    (lambda c: c.update(frontend={"cpu": "2 cores"}),
     "frontend.cpu: '2 cores' is not a Kubernetes CPU quantity"),
    (_prefill(cpuRequest="0.0005"),
     "workers.prefill.cpuRequest: '0.0005' is finer than 1m (a thousandth of a CPU), which Kubernetes does not "
     "allow; write 1m"),
    (_prefill(cpuRequest="4", cpuLimit="2"),
     "workers.prefill: cpuRequest 4 is above cpuLimit 2; Kubernetes rejects that. Lower cpuRequest to at most 2"),
])
def test_cpu_values_are_read_as_kubernetes_reads_them(edit, message):
    assert f"{F}: {message}" in _refused(edit)


def test_cpu_is_written_in_kubernetes_canonical_form():
    comps = components(run_stack("cross-server", _prefill(cpuRequest="0.5", cpuLimit="2000m")))
    resources = main_container(comps["prefill"])["resources"]
    assert (resources["requests"]["cpu"], resources["limits"]["cpu"]) == ("500m", "2")


# --- names that point at something resolve ------------------------------------------------------

@pytest.mark.parametrize("measured, message", [
    ({"fromGroup": "prefil", "toGroup": "decode", "bytesPerSecond": "119M"},
     "sizing.measured[0].fromGroup: unknown prefill group 'prefil'; did you mean 'prefill'? a measured throughput "
     "belongs to a prefill -> decode path. Prefill groups: prefill"),
    ({"fromGroup": "prefill", "toGroup": "prefill", "bytesPerSecond": "119M"},
     "sizing.measured[0].toGroup: 'prefill' is a prefill group, not a decode group"),
])
def test_a_measured_throughput_for_a_group_that_does_not_exist_is_refused(measured, message):
    assert f"{F}: {message}" in _refused(lambda c: c.update(sizing={"measured": [measured]}))


def test_probe_groups_resolve_with_did_you_mean():
    msg = _refused(lambda c: c.update(probe={"enabled": True, "toGroup": "decod"}))
    assert f"{F}: probe.toGroup: unknown decode group 'decod'; did you mean 'decode'?" in msg


# --- capacities of zero never reach a division ---------------------------------------------------

@pytest.mark.parametrize("edit, key", [
    (lambda c: c.update(gpuClasses={"gpu-8gb": {"memory": 0, "effectiveTflops": 15, "nodeSelector": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["a"]}]}, "gpu-24gb": {
        "memory": "24Gi", "effectiveTflops": 40, "nodeSelector": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["b"]}]}}), "gpuClasses.gpu-8gb.memory"),
    (lambda c: c.update(sizing={"sameNodeBytesPerSecond": "0"}), "sizing.sameNodeBytesPerSecond"),
    (lambda c: c.update(sizing={"measured": [{"fromGroup": "prefill", "toGroup": "decode", "bytesPerSecond": 0}]}),
     "sizing.measured[0].bytesPerSecond"),
    (lambda c: c.update(sizing={"link": {"rate": "0gbit"}}), "sizing.link.rate"),
    (lambda c: c.update(sizing={"link": {"efficiency": 0}}), "sizing.link.efficiency"),
    (lambda c: c.update(workload={"inputTokens": 0}), "workload.inputTokens"),
])
def test_a_zero_capacity_is_refused_not_divided_by(edit, key):
    assert f"{F}: {key}: " in _refused(edit)


# --- graphs that cannot serve, settings that contradict the workload -----------------------------

def test_a_disaggregated_side_with_no_replicas_is_refused():
    assert _refused(_decode(replicas=0)) == (
        f"{F}: workers.decode.replicas: the decode side (decode) has 0 replicas in all, so every request would "
        "wait forever for a decode worker. Give it at least 1")


def test_an_aggregated_graph_with_no_replicas_is_refused():
    msg = _refused(lambda c: [g.update(replicas=0) for g in c["workers"]], stack="kv-routing")
    assert "workers.worker-24gb.replicas: the agg side (worker-24gb, worker-8gb) has 0 replicas in all, so no " \
           "worker would serve a request" in msg


@pytest.mark.parametrize("args, shown", [(["--max-model-len", "2048"], "2048 (2,048 tokens)"),
                                          (["--max-model-len=2k"], "2k (2,000 tokens)")])
def test_a_context_shorter_than_the_sized_requests_is_refused(args, shown):
    assert _refused(_decode(extraArgs=args)) == (
        f"{F}: workers.decode.extraArgs: --max-model-len {shown} is shorter than the requests this stack is "
        "sized for: 2,371 input tokens (workload.inputTokens) + 64 output tokens (workload.outputTokens) = "
        "2,435; vLLM would reject every one. Raise it to at least 2435, or remove it")


def test_a_long_enough_context_passes_through():
    comps = components(run_stack("cross-server", _decode(extraArgs=["--max-model-len", "8192"])))
    assert flag(main_container(comps["decode"])["args"], "--max-model-len") == "8192"


@pytest.mark.parametrize("flag_, fix", [("--tensor-parallel-size=2", "Set the group's tensorParallel instead"),
                                        ("--kv-cache-dtype", "Set model.dtype instead")])
def test_flags_that_contradict_the_sizing_are_refused(flag_, fix):
    assert fix in _refused(_prefill(extraArgs=[flag_]))


@pytest.mark.parametrize("version", ["1.6", "^1.6.2", ">=1.6.0", "1.6.x", "latest"])
def test_a_chart_version_that_is_not_one_release_is_refused(version):
    msg = _refused(lambda c: c.update(platform={"version": version}))
    assert msg.startswith(f"{F}: platform.version: '{version}' is ")
    assert msg.endswith("the stack pins one exact chart release so every `pulumi up` installs the same chart. "
                        "Write e.g. 1.6.2")


@pytest.mark.parametrize("tls, message", [
    ("", "workers.prefill.kvTransfer.ucxTls: '' names no transport, so UCX could not connect anything"),
    (" , ", "names no transport"),
    ("tpc,self", "workers.prefill.kvTransfer.ucxTls: 'tpc' is not a UCX transport; did you mean 'tcp'?"),
])
def test_an_empty_or_misspelled_transport_list_is_refused(tls, message):
    assert message in _refused(_prefill(kvTransfer={"ucxTls": tls}))


def test_a_pair_without_a_shared_transport_is_refused():
    msg = _refused(_prefill(kvTransfer={"ucxTls": "rc,self"}))
    assert (f"{F}: workers.decode.kvTransfer.ucxTls: prefill 'prefill' and decode 'decode' share no transport "
            "that reaches from one pod to another (UCX_TLS rc,self and tcp,self") in msg


def test_a_pair_with_different_buffer_devices_is_refused():
    def edit(c):
        c["workers"][0]["kvTransfer"] = {"bufferDevice": "cuda", "ucxTls": "rc,cuda_copy"}
        c["workers"][1]["kvTransfer"] = {"bufferDevice": "cpu", "ucxTls": "rc,tcp"}
    assert (f"{F}: workers.decode.kvTransfer.bufferDevice: prefill 'prefill' and decode 'decode' keep their KV "
            "transfer buffers in cuda and cpu memory") in _refused(edit)


@pytest.mark.parametrize("connector, why", [
    ("NixlPushConnector", "the prefill side would push, a path vLLM 0.31.0 has but Dynamo 1.6 does not take"),
    ("NixlPullConnector", "it is vLLM's name for what Dynamo calls NixlConnector (the decode side pulls)"),
])
def test_a_connector_dynamo_does_not_accept_is_refused_with_the_one_it_does(connector, why):
    # Dynamo 1.6's vLLM component refuses any other NIXL name per request, after the workers are Ready.
    msg = _refused(_prefill(kvTransfer={"connector": connector}))
    assert msg.startswith(f"{F}: workers.prefill.kvTransfer.connector: {connector} is not a connector Dynamo 1.6 "
                          f"accepts: {why}.")
    assert "Write connector: NixlConnector" in msg


# --- numbers right for the role -------------------------------------------------------------------

def test_an_aggregated_worker_below_its_floor_hears_about_its_base_not_a_mirror():
    msg = _refused(lambda c: c["workers"][0].update(memoryLimit="2Gi"), stack="kv-routing")
    assert msg == (
        "Pulumi.kv-routing.yaml: workers.worker-24gb.memoryLimit: 2048Mi is below the 3.5Gi (3584Mi) this worker "
        "needs: its vLLM base resident memory (sizing.vllmBaseMemory; an aggregated worker keeps no KV host "
        "mirror), and the pod would be OOMKilled loading the model. Raise memoryLimit to at least 3584Mi, or "
        "lower sizing.vllmBaseMemory if you measured less")
    assert "mirror of" not in msg and "headroom" not in msg


def test_a_kv_pool_that_cannot_hold_one_max_length_sequence_is_refused():
    # 200Mi = 114 blocks of 16 tokens x 28 layers x 64 KiB; the default context is 2,371 + 64 tokens
    # rounded up to 2,448, 153 blocks, plus the null block vLLM keeps back.
    assert _refused(_decode(kvCacheBytes="200Mi")) == (
        f"{F}: workers.decode.kvCacheBytes: the 200.0Mi KV pool holds 114 blocks of 16 tokens (1,835,008 bytes "
        "each across 28 layers), but one sequence of max_model_len 2,448 (derived) needs 154: its 153 blocks and "
        "vLLM's null block. vLLM refuses to start (\"To serve at least one request with the model's max seq len "
        "...\") and the pod crash-loops. Fix: raise workers.decode.kvCacheBytes to at least 270Mi (a shorter "
        "context does not help: this pool cannot hold even the sized requests, 2,435 tokens)")


def test_a_max_model_len_in_extra_args_above_the_pool_is_refused_with_both_fixes():
    # The lab's 2Gi prefill pool holds 1,170 blocks: 18,704 tokens after the null block.
    msg = _refused(_prefill(extraArgs=["--max-model-len", "32768"]))
    assert msg.startswith(f"{F}: workers.prefill.kvCacheBytes: the 2.0Gi KV pool holds 1,170 blocks")
    assert "one sequence of max_model_len 32,768 (extraArgs) needs 2,049" in msg
    assert ("Fix: raise workers.prefill.kvCacheBytes to at least 3586Mi, or shorten the context with "
            "workers.prefill.extraArgs --max-model-len: at most 18,704 tokens fit") in msg


def test_the_models_whole_context_does_not_fit_the_shipped_pools():
    # What a worker without --max-model-len would ask for: Qwen3-0.6B's 40,960 tokens, 4.375 GiB of KV.
    msg = _refused(lambda c: c.setdefault("workload", {}).update(maxModelLen=40960))
    assert "workers.prefill.kvCacheBytes: the 2.0Gi KV pool" in msg
    assert "workers.decode.kvCacheBytes: the 4.0Gi KV pool" in msg
    assert "needs 2,561" in msg and "at least 4482Mi" in msg  # 2,561 x 1.75Mi


@pytest.mark.parametrize("value, meant", [
    (50000, "maxModelLen 50000 (50,000 tokens) is longer than Qwen/Qwen3-0.6B's context "
            "(max_position_embeddings 40,960 in its config.json)"),
    (2000, "maxModelLen 2000 (2,000 tokens) is shorter than the requests this stack is sized for: 2,371 input "
           "tokens (workload.inputTokens) + 64 output tokens (workload.outputTokens) = 2,435"),
])
def test_a_context_length_outside_the_model_or_the_requests_is_refused(value, meant):
    msg = _refused(lambda c: c.setdefault("workload", {}).update(maxModelLen=value))
    assert msg.startswith(f"{F}: workload.maxModelLen: {meant}")


@pytest.mark.parametrize("value", ["-1", "auto", "lots"])
def test_a_max_model_len_that_is_not_a_token_count_is_refused(value):
    msg = _refused(_decode(extraArgs=["--max-model-len", value]))
    assert msg.startswith(f"{F}: workers.decode.extraArgs: --max-model-len {value!r} is not a token count")


def test_a_benchmark_longer_than_the_workers_context_is_refused():
    def edit(c):
        c.setdefault("workload", {}).update(maxModelLen=2448)
        c["benchmark"] = {"enabled": True, "uniqueTokens": 600}
    msg = _refused(edit)
    assert msg.startswith(f"{F}: benchmark: the benchmark's requests take 2,664 tokens (prefixTokens 2000 + "
                          "uniqueTokens 600 + outputTokens 64), more than the 2,448-token context")


def test_a_request_above_the_floor_without_a_limit_is_refused():
    assert _refused(_prefill(memoryRequest="20Gi")).startswith(
        f"{F}: workers.prefill.memoryRequest: 20480Mi is above the host memory floor (the limit while memoryLimit "
        "is unset), 5837Mi; Kubernetes rejects a request above its limit.")


# --- names Kubernetes and Dynamo derive ----------------------------------------------------------

@pytest.mark.parametrize("rule, message", [
    ({"key": "nvidia.com/gpu memory", "operator": "Exists"}, "is not a Kubernetes label key"),
    ({"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu server"]}, "is not a Kubernetes label value"),
    ({"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["20GB"]}, "needs exactly one integer value"),
])
def test_node_rules_the_api_server_would_reject_are_refused(rule, message):
    def edit(c):
        c["gpuClasses"] = {"gpu-24gb": {"memory": "24Gi", "effectiveTflops": 40, "nodeSelector": [rule]},
                           "gpu-8gb": {"memory": "8Gi", "effectiveTflops": 15, "nodeSelector": [
                               {"key": "kubernetes.io/hostname", "operator": "In", "values": ["laptop"]}]}}
    assert message in _refused(edit)


@pytest.mark.parametrize("name, message", [
    ("a-very-long-graph-name-for-this-lab", "graph.name: 'a-very-long-graph-name-for-this-lab' is 35 characters; "
                                            "names derived from it (the probe's Job "
                                            "`<graph>-kv-probe-initiator-<digest>`) must fit 63, so it can have "
                                            "at most 33"),
    ("2lab", "graph.name: '2lab' starts with a digit"),
])
def test_graph_names_that_would_break_derived_names_are_refused(name, message):
    assert message in _refused(lambda c: c.update(graph={"name": name}))


def _as_stack(stack: str, edit=None) -> ConfigError:
    """cross-server's file loaded as stack `stack` (the graph takes the stack's name)."""
    with pytest.raises(ConfigError) as info:
        load_stack(stack, raw_config("cross-server", edit))
    return info.value


def test_a_stack_name_too_long_for_the_probes_job_is_refused_when_the_probe_is_on():
    # graph.name's own check sees only a name written; unset, the graph takes the stack's name.
    stack = "s" + "a" * 33  # 34 characters: the probe's Job would be 64
    probe_on = lambda c: c.update(probe={"enabled": True})  # noqa: E731
    assert str(_as_stack(stack, probe_on)).endswith(
        f"graph.name: unset, the graph is named after the stack: {stack!r}, 34 characters; the probe's Job "
        "`<graph>-kv-probe-initiator-<digest>` would be 64 characters, more than the 63 Kubernetes allows. Give "
        f"the graph a name of at most 33 characters: pulumi config set --path graph.name <name> --stack {stack}")
    assert load_stack(stack, raw_config("cross-server", lambda c: (probe_on(c), c.update(graph={"name": "lab"}))))
    assert load_stack(stack, raw_config("cross-server"))  # no probe, no Job: the name fits what it names


def test_a_stack_name_too_long_for_the_frontends_service_is_refused():
    stack = "s" * 50  # `<graph>-frontend` is 59; 55 makes it 64
    assert load_stack(stack, raw_config("cross-server", lambda c: c.update(modelCache={"mode": "off"})))
    err = str(_as_stack("s" * 55, lambda c: c.update(modelCache={"mode": "off"})))
    assert f"graph.name: unset, the graph is named after the stack: {'s' * 55!r}, 55 characters; the operator " \
           f"would name the frontend's Service '{'s' * 55}-frontend', more than the 63 characters" in err


def test_two_groups_of_one_name_each_keep_their_own_context_check():
    # A duplicate name is one mistake; each group's --max-model-len is still judged as its own.
    def edit(c):
        c["workers"][0]["extraArgs"] = ["--max-model-len=abc"]
        c["workers"][1]["name"] = c["workers"][0]["name"]
        c["workers"][1]["extraArgs"] = ["--max-model-len", "100"]
    err = str(_as_stack("cross-server", edit))
    assert "is used twice" in err
    assert "--max-model-len 'abc' is not a token count" in err
    assert "--max-model-len 100 (100 tokens) is shorter than" in err


# --- secrets --------------------------------------------------------------------------------------

def test_a_plain_text_token_is_refused_with_the_command_and_never_shown():
    msg = _refused(lambda c: c.update(hfToken="hf_plaintextsecret"))
    assert msg == (f"{F}: hfToken: is written in plain text in the stack file, where anyone who can read the "
                   "repository reads it. Store it encrypted instead (remove the plain line first): pulumi config "
                   "set --secret hfToken <your token> --stack cross-server")
    assert "hf_plaintextsecret" not in msg


def test_a_token_of_the_wrong_type_is_refused_without_echoing_it():
    msg = _refused(lambda c: c.update(hfToken={"value": "hf_plaintextsecret"}), secret_keys=["dynamo-lab:hfToken"])
    assert "hfToken: must be a single string" in msg and "hf_plaintextsecret" not in msg


# --- what the operator accepts is accepted ---------------------------------------------------------

def test_an_image_tag_with_a_leading_v_is_accepted_as_the_operator_does():
    image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:v1.6.2"
    comps = components(run_stack("cross-server", lambda c: c.update(image=image)))
    assert main_container(comps["decode"])["image"].endswith(":v1.6.2")


def test_a_flag_and_its_value_in_one_element_is_refused():
    msg = _refused(_decode(extraArgs=["--max-model-len 100"]))
    assert msg == (f"{F}: workers.decode.extraArgs: '--max-model-len 100' is one element, so vLLM would read it as "
                   "a single unknown argument and exit. Write the flag and its value as two elements "
                   "('--max-model-len', '100'), or as --max-model-len=100")
    # ... and split that way, it is checked like any other: too short for the sized requests.
    assert "--max-model-len 100 (100 tokens) is shorter" in _refused(_decode(extraArgs=["--max-model-len", "100"]))


# --- keys, names and references ------------------------------------------------------------------

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


@pytest.mark.parametrize("stack", ["cross-server", "kv-routing"])
@pytest.mark.parametrize("typo", ["gpu-24gb ", "GPU-24gb", "gpu_24gb"])
def test_a_gpu_class_typo_is_one_error_not_a_second_about_a_class_never_defined(stack, typo):
    # A worker's misspelled class that is not a DNS label: the node cache's claim check must not
    # report it as if it were a class of gpuClasses.
    err = refused(stack, lambda c: c["workers"][0].update(gpuClass=typo))
    assert [p.endswith(".gpuClass") for p, _ in err.problems] == [True]
    assert f"unknown GPU class {typo!r}; did you mean 'gpu-24gb'?" in str(err)


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


def test_a_word_for_a_number_gets_the_house_message_not_the_validators_text():
    err = _error(lambda c: c["workers"][1].update(replicas="two"))
    assert str(err) == (f"{F}: workers.decode.replicas: 'two' is not a whole number; write it in digits, "
                        "e.g. `replicas: 2`")


@pytest.mark.parametrize("edit, message", [
    (lambda c: c["workers"][0].update(replicas=1.5), "workers.prefill.replicas: 1.5 is not a whole number"),
    (lambda c: c.update(graph={"networkPolicy": "maybe"}),
     "graph.networkPolicy: 'maybe' is not true or false; write `networkPolicy: true` or `networkPolicy: false`"),
    (lambda c: c.update(benchmark={"concurrency": "4,8"}), "benchmark.concurrency: '4,8' is not a list"),
    (lambda c: c.update(platform={"values": "x"}), "platform.values: 'x' is not a map"),
    (lambda c: c["workers"][0].update(extraArgs="--max-num-seqs"),
     "workers.prefill.extraArgs: '--max-num-seqs' is not a list"),
    (lambda c: c.update(gpuClasses={"a": {"memory": "1Gi", "effectiveTflops": "fast", "nodeSelector": []}}),
     "gpuClasses.a.effectiveTflops: 'fast' is not a number"),
    (lambda c: c.update(gpuClasses={"a": {"memory": "1Gi", "effectiveTflops": 1, "nodeSelector": []}}),
     "gpuClasses.a.nodeSelector: [] has 0 items; it needs at least 1"),
])
def test_a_value_of_the_wrong_type_says_what_to_write(edit, message):
    text = str(_error(edit))
    assert f"{F}: {message}" in text
    assert "Input should" not in text


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
    assert "'--kv-transfer-config=...' sets --kv-transfer-config, which dynamo-lab writes itself" in str(err)


def test_unknown_model_needs_its_geometry():
    err = _error(lambda c: c.update(model={"name": "org/other-model"}))
    assert "missing layers, kvHeads, headDim, parameters" in str(err)


def test_a_built_in_model_in_another_letter_case_is_named_as_the_catalogue_spells_it():
    err = _error(lambda c: c.update(model={"name": "qwen/qwen3-0.6b"}))
    assert str(err) == (
        "Pulumi.cross-server.yaml: model: model 'qwen/qwen3-0.6b' is not built in, but 'Qwen/Qwen3-0.6B' is (the "
        "letter case differs, and it counts: the name is the Hugging Face repository vLLM downloads and the model "
        "the frontend serves). Write name: Qwen/Qwen3-0.6B, or give this model's geometry: layers, kvHeads, "
        "headDim, parameters from its config.json and its parameter count")
    assert "but 'Qwen/Qwen3-8B' is. Write name: Qwen/Qwen3-8B" in str(
        _error(lambda c: c.update(model={"name": "Qwen/Qwen3-8b-"})))


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


def test_a_gpu_class_name_the_node_cache_cannot_use_in_a_claim_name_is_refused():
    def edit(c):
        c["gpuClasses"] = {"GPU_24": {"memory": "24564Mi", "effectiveTflops": 40,
                                      "nodeSelector": [{"key": "nvidia.com/gpu.memory", "operator": "Gt",
                                                        "values": ["20000"]}]},
                           "gpu-8gb": {"memory": "8188Mi", "effectiveTflops": 15,
                                       "nodeSelector": [{"key": "nvidia.com/gpu.memory", "operator": "Lt",
                                                         "values": ["12000"]}]}}
        c["workers"][1]["gpuClass"] = "GPU_24"
    msg = _refused(edit)
    assert msg.startswith(f"{F}: gpuClasses.GPU_24: the node cache's claim for this class would be named "
                          "'cross-server-model-cache-GPU_24', which is not a DNS label")
    assert "Rename the class, e.g. 'gpu-24'" in msg


# --- namespaces: a key the program would never read ----------------------------------------------

@pytest.mark.parametrize("namespace", ["dynamo-lb", "dynamolab", "Dynamo_Lab"])
def test_a_misspelled_namespace_is_refused_with_the_key_it_meant(namespace):
    err = _error(lambda c: c.update({f"{namespace}:image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1"}))
    assert str(err) == (
        f"{F}: {namespace}:image: unknown namespace `{namespace}:`: this program reads `dynamo-lab:` keys and "
        "`kubernetes:context` / `kubernetes:kubeconfig` only, so this key would be silently ignored; did you "
        f"mean `dynamo-lab:image`? Rename the key in {F}")


def test_a_namespace_nothing_like_the_projects_is_refused_with_the_command_to_remove_it():
    err = _error(lambda c: c.update({"aws:region": "eu-west-1"}))
    assert str(err).endswith("so this key would be silently ignored. Remove it: pulumi config rm aws:region "
                             "--stack cross-server")


def test_pulumis_own_namespace_is_accepted():
    assert "pulumi:disable-default-providers" in raw_config("cross-server")
    run_stack("cross-server", lambda c: c.update({"pulumi:tags": {"team": "lab"}}))


def test_a_required_key_in_a_misspelled_namespace_is_named_where_it_is_missing():
    err = _error(lambda c: c.update({"dynamo-lb:workers": c.pop("workers")}))
    assert err.problems[0][0] == "dynamo-lb:workers"
    assert f"{F}: workers: required key is missing: the stack file sets `dynamo-lb:workers`, in a misspelled " \
           "namespace; rename it `dynamo-lab:workers`" in str(err).splitlines()


def test_the_cluster_context_in_a_misspelled_namespace_is_named_where_it_is_missing():
    err = _error(lambda c: c.update({"kubernets:context": c.pop("kubernetes:context")}))
    assert [p for p, _ in err.problems] == ["kubernets:context", "kubernetes:context"]
    assert str(err).endswith("(the stack file sets `kubernets:context`, in a misspelled namespace: rename it "
                             "`kubernetes:context`)")

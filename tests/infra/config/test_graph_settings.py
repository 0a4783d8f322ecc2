"""Stack-file mistakes in a graph that cannot serve, in settings that contradict the workload or the
engine; and what the operator accepts, accepted, each refused with the file, the key and the fix,
and nothing registered."""

from __future__ import annotations

import pytest

from tests.helpers import components, flag, main_container, run_stack
from tests.infra.config.refusing import F, decode, prefill, refused_text

# --- graphs that cannot serve, settings that contradict the workload -----------------------------

def test_a_disaggregated_side_with_no_replicas_is_refused():
    assert refused_text(decode(replicas=0)) == (
        f"{F}: workers.decode.replicas: the decode side (decode) has 0 replicas in all, so every request would "
        "wait forever for a decode worker. Give it at least 1")


def test_an_aggregated_graph_with_no_replicas_is_refused():
    msg = refused_text(lambda c: [g.update(replicas=0) for g in c["workers"]], stack="kv-routing")
    assert "workers.worker-24gb.replicas: the agg side (worker-24gb, worker-8gb) has 0 replicas in all, so no " \
           "worker would serve a request" in msg


@pytest.mark.parametrize("args, shown", [(["--max-model-len", "2048"], "2048 (2,048 tokens)"),
                                          (["--max-model-len=2k"], "2k (2,000 tokens)")])
def test_a_context_shorter_than_the_sized_requests_is_refused(args, shown):
    assert refused_text(decode(extraArgs=args)) == (
        f"{F}: workers.decode.extraArgs: --max-model-len {shown} is shorter than the requests this stack is "
        "sized for: 2,371 input tokens (workload.inputTokens) + 64 output tokens (workload.outputTokens) = "
        "2,435; vLLM would reject every one. Raise it to at least 2435, or remove it")


def test_a_long_enough_context_passes_through():
    comps = components(run_stack("cross-server", decode(extraArgs=["--max-model-len", "8192"])))
    assert flag(main_container(comps["decode"])["args"], "--max-model-len") == "8192"


@pytest.mark.parametrize("flag_, fix", [("--tensor-parallel-size=2", "Set the group's tensorParallel instead"),
                                        ("--kv-cache-dtype", "Set model.dtype instead")])
def test_flags_that_contradict_the_sizing_are_refused(flag_, fix):
    assert fix in refused_text(prefill(extraArgs=[flag_]))


@pytest.mark.parametrize("version", ["1.6", "^1.6.2", ">=1.6.0", "1.6.x", "latest"])
def test_a_chart_version_that_is_not_one_release_is_refused(version):
    msg = refused_text(lambda c: c.update(platform={"version": version}))
    assert msg.startswith(f"{F}: platform.version: '{version}' is ")
    assert msg.endswith("the stack pins one exact chart release so every `pulumi up` installs the same chart. "
                        "Write e.g. 1.6.2")


@pytest.mark.parametrize("tls, message", [
    ("", "workers.prefill.kvTransfer.ucxTls: '' names no transport, so UCX could not connect anything"),
    (" , ", "names no transport"),
    ("tpc,self", "workers.prefill.kvTransfer.ucxTls: 'tpc' is not a UCX transport; did you mean 'tcp'?"),
])
def test_an_empty_or_misspelled_transport_list_is_refused(tls, message):
    assert message in refused_text(prefill(kvTransfer={"ucxTls": tls}))


def test_a_pair_without_a_shared_transport_is_refused():
    msg = refused_text(prefill(kvTransfer={"ucxTls": "rc,self"}))
    assert (f"{F}: workers.decode.kvTransfer.ucxTls: prefill 'prefill' and decode 'decode' share no transport "
            "that reaches from one pod to another (UCX_TLS rc,self and tcp,self") in msg


def test_a_pair_with_different_buffer_devices_is_refused():
    def edit(c):
        c["workers"][0]["kvTransfer"] = {"bufferDevice": "cuda", "ucxTls": "rc,cuda_copy"}
        c["workers"][1]["kvTransfer"] = {"bufferDevice": "cpu", "ucxTls": "rc,tcp"}
    assert (f"{F}: workers.decode.kvTransfer.bufferDevice: prefill 'prefill' and decode 'decode' keep their KV "
            "transfer buffers in cuda and cpu memory") in refused_text(edit)


@pytest.mark.parametrize("connector, why", [
    ("NixlPushConnector", "the prefill side would push, a path vLLM 0.31.0 has but Dynamo 1.6 does not take"),
    ("NixlPullConnector", "it is vLLM's name for what Dynamo calls NixlConnector (the decode side pulls)"),
])
def test_a_connector_dynamo_does_not_accept_is_refused_with_the_one_it_does(connector, why):
    # Dynamo 1.6's vLLM component refuses any other NIXL name per request, after the workers are Ready.
    msg = refused_text(prefill(kvTransfer={"connector": connector}))
    assert msg.startswith(f"{F}: workers.prefill.kvTransfer.connector: {connector} is not a connector Dynamo 1.6 "
                          f"accepts: {why}.")
    assert "Write connector: NixlConnector" in msg


# --- what the operator accepts is accepted ---------------------------------------------------------

def test_an_image_tag_with_a_leading_v_is_accepted_as_the_operator_does():
    image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:v1.6.2"
    comps = components(run_stack("cross-server", lambda c: c.update(image=image)))
    assert main_container(comps["decode"])["image"].endswith(":v1.6.2")


def test_a_flag_and_its_value_in_one_element_is_refused():
    msg = refused_text(decode(extraArgs=["--max-model-len 100"]))
    assert msg == (f"{F}: workers.decode.extraArgs: '--max-model-len 100' is one element, so vLLM would read it as "
                   "a single unknown argument and exit. Write the flag and its value as two elements "
                   "('--max-model-len', '100'), or as --max-model-len=100")
    # ... and split that way, it is checked like any other: too short for the sized requests.
    assert "--max-model-len 100 (100 tokens) is shorter" in refused_text(decode(extraArgs=["--max-model-len", "100"]))


def test_more_workers_in_all_than_one_group_may_run_is_refused_before_the_sizing_places_them():
    # Each group within its 4,096 replicas, 5 of them 20,480 workers: the sizing places every one on
    # its class's nodes (a minute and more at this scale), which a stack file must not be able to ask.
    def edit(c):
        c["gpuClasses"]["gpu-80gb"].update(nodes=1024, gpusPerNode=64)
        c["workers"] = [{"name": f"g{i}", "role": "agg", "replicas": 4096, "gpuClass": "gpu-80gb"} for i in range(5)]
    assert refused_text(edit, stack="two-node-rdma") == (
        "Pulumi.two-node-rdma.yaml: workers: the groups run 20,480 workers in all (g0 4,096, g1 4,096, g2 4,096 "
        "and 2 more groups), more than the 4,096 a stack may run (as one group may): the sizing and preflight "
        "place each worker on its class's nodes one by one, and 4,096 is far beyond the clusters dynamo-lab "
        "sizes. Lower replicas to 4,096 in all, or deploy the groups as several stacks")

"""Stack-file mistakes in quantities and CPU, as Kubernetes reads them, and capacities of zero, which
never reach a division, each refused with the file, the key and the fix, and nothing registered."""

from __future__ import annotations

import pytest

from tests.helpers import components, main_container, run_stack
from tests.infra.config.refusing import F, decode, prefill, refused_text

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
    assert meant in refused_text(decode(memoryLimit=value))


def test_a_memory_value_is_passed_on_exactly_not_rounded():
    # 8500M is not whole MiB: the manifest carries exactly the bytes that were written.
    comps = components(run_stack("cross-server", decode(memoryLimit="8500M", memoryRequest="8000001Ki")))
    resources = main_container(comps["decode"])["resources"]
    assert resources["limits"]["memory"] == "8500M"
    assert resources["requests"]["memory"] == "8000001Ki"


@pytest.mark.parametrize("edit, message", [
    (lambda c: c.update(frontend={"cpu": "2 cores"}),
     "frontend.cpu: '2 cores' is not a Kubernetes CPU quantity"),
    (prefill(cpuRequest="0.0005"),
     "workers.prefill.cpuRequest: '0.0005' is finer than 1m (a thousandth of a CPU), which Kubernetes does not "
     "allow; write 1m"),
    (prefill(cpuRequest="4", cpuLimit="2"),
     "workers.prefill.cpuRequest: cpuRequest 4 is above cpuLimit 2; Kubernetes rejects that. Lower cpuRequest to "
     "at most 2"),
])
def test_cpu_values_are_read_as_kubernetes_reads_them(edit, message):
    assert f"{F}: {message}" in refused_text(edit)


def test_cpu_is_written_in_kubernetes_canonical_form():
    comps = components(run_stack("cross-server", prefill(cpuRequest="0.5", cpuLimit="2000m")))
    resources = main_container(comps["prefill"])["resources"]
    assert (resources["requests"]["cpu"], resources["limits"]["cpu"]) == ("500m", "2")


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
    assert f"{F}: {key}: " in refused_text(edit)


def test_a_class_sustaining_more_than_its_dense_peak_is_refused_with_the_numbers():
    # effectiveTflops is the prefill rate the sizing and the predictor both run at: above the peak
    # no kernel runs.
    big = {"memory": "24564Mi", "effectiveTflops": 200, "peakTflops": 71, "memoryBandwidth": "936G",
           "nodeSelector": [{"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["20000"]}]}
    small = {"memory": "8188Mi", "effectiveTflops": 15, "peakTflops": 33, "memoryBandwidth": "448G",
             "nodeSelector": [{"key": "nvidia.com/gpu.memory", "operator": "Lt", "values": ["12000"]}]}
    msg = refused_text(lambda c: c.update(gpuClasses={"gpu-24gb": big, "gpu-8gb": small}))
    assert f"{F}: gpuClasses.gpu-24gb.effectiveTflops: effectiveTflops 200 is above peakTflops 71: no kernel runs " \
           "above the card's dense peak, and prefill sustains about 40-65% of it. Write effectiveTflops at most 71, " \
           "e.g. 39 (55% of the peak), or correct peakTflops" in msg


def test_a_vocabulary_as_large_as_the_model_is_refused():
    msg = refused_text(lambda c: c.update(model={"name": "mine/tiny", "layers": 2, "kvHeads": 1, "headDim": 64,
                                                 "hiddenSize": 64, "parameters": 100_000, "vocabSize": 1000}))
    assert "model 'mine/tiny': its embedding and LM head (1,000 x 64 each) hold as many parameters as the whole " \
           "model (100,000), so no layer would be left" in msg

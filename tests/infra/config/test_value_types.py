"""Values of the wrong type, as the Pulumi CLI hands them to the program: a structured setting as the
JSON text Go's encoding/json writes (exact types: 1, 1.0 is 1 too, "1", true), a top-level scalar
as text. The schema takes each value as the type it was written as (strict): a count is an integer,
not a boolean, text or a decimal; a name is text; a number is finite; and an integer past the 64
bits Pulumi's reader holds is refused as the JSON is read. Each in one line naming the file and the
key, never a traceback. (The lab's reader of the same mistakes in a file: tests/lab/test_stack_file_types.py.)"""

from __future__ import annotations

import copy
import json

import pytest

from infra.errors import ConfigError
from infra.load import load

F = "Pulumi.cross-server.yaml"
# cross-server's file, as the CLI hands it over.
CONFIG = {
    "workers": [{"name": "prefill", "role": "prefill", "replicas": 1, "gpuClass": "gpu-8gb", "kvCacheBytes": "2Gi"},
                {"name": "decode", "role": "decode", "replicas": 2, "gpuClass": "gpu-24gb", "kvCacheBytes": "4Gi"}],
}
HUGE = "@huge@"  # a value written out as its digits in the JSON text, past what json.dumps will write


def _raw(config: dict, huge: str = "") -> dict[str, str]:
    raw = {"kubernetes:context": "dynamo-lab", "pulumi:disable-default-providers": '["kubernetes"]'}
    for key, value in config.items():
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), sort_keys=True)
        raw[f"dynamo-lab:{key}"] = text.replace(f'"{HUGE}"', huge)
    return raw


def _with(path: str, value) -> dict:
    """CONFIG with `value` at `path` (`workers.0.replicas`, `frontend.replicas`): sections made as needed."""
    config = copy.deepcopy(CONFIG)
    *parents, last = path.split(".")
    node = config
    for part in parents:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    node[int(last) if last.isdigit() else last] = value
    return config


def _refused(config: dict, huge: str = "") -> str:
    with pytest.raises(ConfigError) as caught:
        load(_raw(config, huge), "cross-server")
    message = str(caught.value)
    assert "\n" not in message and "Input should" not in message, message
    return message


COUNTS = {"workers.0.replicas": "workers.prefill.replicas", "workers.1.tensorParallel": "workers.decode.tensorParallel",
          "frontend.replicas": "frontend.replicas", "workload.prefixTypes": "workload.prefixTypes",
          "graph.readyTimeoutSeconds": "graph.readyTimeoutSeconds",
          "modelCache.prePull.timeoutSeconds": "modelCache.prePull.timeoutSeconds"}


@pytest.mark.parametrize("value, message", [
    (True, "the boolean true is not a whole number; write it in digits, e.g. `{key}: 2`"),  # was taken as 1
    (False, "the boolean false is not a whole number; write it in digits, e.g. `{key}: 2`"),
    ("3", "'3' is text, not a whole number, because it is quoted; write it without the quotes: `{key}: 3`"),
    ("yes", "'yes' is not a whole number; write it in digits, e.g. `{key}: 2`"),
    (2.0, "2.0 is not a whole number but a decimal; write it without the point: `{key}: 2`"),  # was taken as 2
])
@pytest.mark.parametrize("path", COUNTS)
def test_a_count_is_an_integer_not_a_value_converted_to_one(path, value, message):
    key = path.rsplit(".", 1)[1]
    assert _refused(_with(path, value)) == f"{F}: {COUNTS[path]}: {message.format(key=key)}"


@pytest.mark.parametrize("path, shown, value", [
    ("benchmark.enabled", "'yes'", "yes"), ("graph.networkPolicy", "'on'", "on"),
    ("platform.manage", "1", 1), ("modelCache.prePull.enabled", "'true'", "true"),
])
def test_a_switch_is_a_boolean_not_a_word_or_a_number(path, shown, value):
    key = path.rsplit(".", 1)[1]
    message = _refused(_with(path, value))
    assert message.startswith(f"{F}: {path}: {shown} is not true or false")
    assert message.endswith(f"write `{key}: true` or `{key}: false`")


@pytest.mark.parametrize("path, where, value, message", [
    ("workers.0.gpuClass", "workers.prefill.gpuClass", 8,
     "8 is a number, not text; write it in quotes: `gpuClass: \"8\"`"),
    ("graph.name", "graph.name", False,
     "the boolean false is not text; if you meant the word, write it in quotes: `name: \"false\"`"),
    ("model.name", "model.name", {"value": "Qwen/Qwen3-0.6B"},
     "a map is not text; write it as a string, e.g. `name: \"...\"`"),
    ("model.name", "model.name", ["Qwen/Qwen3-0.6B"],
     "a list is not text; write it as a string, e.g. `name: \"...\"`"),
    ("workers.1.kvTransfer", "workers.decode.kvTransfer.connector", {"connector": {"name": "NixlConnector"}},
     "a map is not allowed; write one of 'NixlConnector'"),
    ("benchmark.image", "benchmark.image", 3.11, "3.11 is a number, not text; write it in quotes: `image: \"3.11\"`"),
    ("workers.0.kvCacheBytes", "workers.prefill.kvCacheBytes", True,
     "the boolean true is not a Kubernetes quantity. Write bytes with a Kubernetes suffix, e.g. 3584Mi, 10Gi, 272M, "
     "1G"),
    ("sizing.link.efficiency", "sizing.link.efficiency", "0.9",
     "'0.9' is text, not a number, because it is quoted; write it without the quotes: `efficiency: 0.9`"),
])
def test_a_name_or_a_size_of_another_type_is_refused(path, where, value, message):
    assert _refused(_with(path, value)) == f"{F}: {where}: {message}"


def test_what_json_cannot_tell_apart_and_the_cli_hands_over_as_text_is_accepted():
    # A whole number where a float is meant (Go writes 1.0 as 1); the top-level scalars, text.
    config = _with("sizing.link.efficiency", 1)
    config["image"] = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.2"
    config["hfToken"] = "hf_secret"
    stack = load(_raw(config), "cross-server", secret_keys=["dynamo-lab:hfToken"])
    assert stack.config.sizing.link.efficiency == 1.0
    assert stack.config.image.endswith(":1.6.2") and stack.config.hf_token.get_secret_value() == "hf_secret"
    gpu = {"memory": "24564Mi", "effectiveTflops": 40, "peakTflops": 71,
           "nodeSelector": [{"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["20000"]}]}
    small = {**gpu, "memory": "8188Mi", "effectiveTflops": 15,
             "nodeSelector": [{"key": "nvidia.com/gpu.memory", "operator": "Lt", "values": ["12000"]}]}
    stack = load(_raw({**CONFIG, "gpuClasses": {"gpu-24gb": gpu, "gpu-8gb": small}}), "cross-server")
    assert stack.config.gpu_classes["gpu-24gb"].effective_tflops == 40.0


@pytest.mark.parametrize("path, where", [("sizing.link.efficiency", "sizing.link.efficiency"),
                                          ("sizing.hostHeadroomPercent", "sizing.hostHeadroomPercent")])
@pytest.mark.parametrize("text", ["Infinity", "NaN"])
def test_an_infinite_number_is_refused(path, where, text):
    # Python's json.loads reads Infinity and NaN (Go's encoding/json never writes them).
    key = path.rsplit(".", 1)[1]
    message = _refused(_with(path, HUGE), huge=text)
    assert message == f"{F}: {where}: {float(text)!r} is not a finite number; write one in digits, e.g. `{key}: 0.5`"


RANGE = ("beyond the 64 bits in which Pulumi's YAML reader holds an integer (-9,223,372,036,854,775,808 to "
         "18,446,744,073,709,551,615); write the number you meant")


@pytest.mark.parametrize("digits", ["9" * 21, "-" + "9" * 5000, "1" + "0" * 5000])
@pytest.mark.parametrize("path, where", [
    ("workers.0.replicas", "workers.prefill.replicas"), ("frontend.replicas", "frontend.replicas"),
    ("benchmark.concurrency", "benchmark.concurrency[1]"), ("platform.values.replicas", "platform.values.replicas"),
])
def test_an_integer_past_64_bits_is_refused_as_the_json_is_read(path, where, digits):
    # json.loads of more than 4,300 digits was a ValueError traceback (Python's int() limit).
    value = [4, HUGE] if path == "benchmark.concurrency" else HUGE
    message = _refused(_with(path, value), huge=digits)
    assert message == f"{F}: {where}: an integer {len(digits.lstrip('-')):,} digits long, {RANGE}"


def test_every_value_of_the_wrong_type_is_reported_at_once():
    config = _with("workers.0.replicas", True)
    config["workers"][1]["gpuClass"] = 24
    config["frontend"] = {"replicas": "2"}
    message = str(pytest.raises(ConfigError, load, _raw(config), "cross-server").value)
    assert [line.split(": ")[1] for line in message.splitlines()] == [
        "frontend.replicas", "workers.prefill.replicas", "workers.decode.gpuClass"]

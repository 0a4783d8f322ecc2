"""Values of the wrong type in a stack file, read by the lab's reader as the Pulumi CLI reads the file
(gopkg.in/yaml.v3: YAML 1.2's booleans, a key written once, integers of 64 bits) and then by the
schema, which takes each value as the type it was written as: each refused in one line naming the
file and the key, never a traceback, never converted to what it was not (`tensorParallel: yes` is
not 1, `replicas: "3"` is not 3)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dynamo_lab import bounded_read, stack_files
from infra.errors import ConfigError
from tests.helpers import ROOT, run_cli

F = "Pulumi.bad.yaml"
STACK = (ROOT / "Pulumi.cross-server.yaml").read_text()
# Where a value can be written in cross-server's file: after a line of it, at that line's indent
# (a worker's key, a section's key), or as a section of its own.
PREFILL = "      gpuClass: gpu-8gb\n"
SECTION = "config:\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    return tmp_path


def _with(line_after: str, text: str) -> str:
    """cross-server's file with `text` written after `line_after` (a section after `config:`)."""
    assert STACK.count(line_after) == 1
    return STACK.replace(line_after, line_after + text)


def _refusal(project: Path, text: str) -> str:
    """The one line the file is refused with, by the lab's reader or the schema (load: read, validate,
    size), and that `render` prints it alone on stderr, exit 2."""
    (project / F).write_text(text)
    with pytest.raises((ConfigError, stack_files.StackFileError)) as caught:
        stack_files.load("bad", project)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{F}: ") and "Input should" not in message, message
    proc = run_cli("render", "bad", cwd=project)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"error: dynamo-lab render: {message}\n"
    return message


# --- how the file is read: YAML 1.2's core schema, as yaml.v3 resolves a plain scalar ---------------

@pytest.mark.parametrize("written, read", [
    ("yes", "yes"), ("no", "no"), ("on", "on"), ("off", "off"), ("y", "y"), ("Yes", "Yes"),  # 1.1's booleans
    ("true", True), ("True", True), ("TRUE", True), ("false", False), ("FALSE", False),
    ("~", None), ("null", None), ("Null", None), ("", None),
    ("1:30", "1:30"), ("=", "="),  # 1.1's sexagesimal 90, and its `value` tag
    ("0o17", 15), ("0x1F", 31), ("0b101", 5), ("0777", 511), ("-0x10", -16), ("+12", 12), ("1_000", 1000),
    ("08", 8.0), ("1e5", 100000.0), ("1.", 1.0), (".5", 0.5), ("-.inf", float("-inf")),
    ("1e400", "1e400"),  # past float64: text to yaml.v3 (ParseFloat's range error)
    ("18446744073709551615", 2**64 - 1), ("-9223372036854775808", -2**63),
    ("'3'", "3"), ('"true"', "true"),
])
def test_a_plain_scalar_is_typed_as_pulumis_reader_types_it(written, read):
    assert stack_files.parse_yaml(f"x: {written}\n", "f") == {"x": read}


# --- counts are whole numbers: not booleans, text, or decimals ------------------------------------

COUNTS = {
    "workers.prefill.replicas": lambda v: STACK.replace("      replicas: 1\n", f"      replicas: {v}\n"),
    "workers.prefill.tensorParallel": lambda v: _with(PREFILL, f"      tensorParallel: {v}\n"),
    "frontend.replicas": lambda v: _with(SECTION, f"  dynamo-lab:frontend:\n    replicas: {v}\n"),
    "workload.concurrency": lambda v: _with(SECTION, f"  dynamo-lab:workload:\n    concurrency: {v}\n"),
    "benchmark.runs": lambda v: _with(SECTION, f"  dynamo-lab:benchmark:\n    runs: {v}\n"),
    "benchmark.concurrency[0]": lambda v: _with(SECTION, f"  dynamo-lab:benchmark:\n    concurrency: [{v}, 8]\n"),
}


@pytest.mark.parametrize("written, message", [
    ("yes", "'yes' is not a whole number; write it in digits, e.g. `{key}: 2`"),  # text to YAML 1.2, not 1
    ("on", "'on' is not a whole number; write it in digits, e.g. `{key}: 2`"),
    ("true", "the boolean true is not a whole number; write it in digits, e.g. `{key}: 2`"),
    ('"3"', "'3' is text, not a whole number, because it is quoted; write it without the quotes: `{key}: 3`"),
    ("2.0", "2.0 is not a whole number but a decimal; write it without the point: `{key}: 2`"),
])
@pytest.mark.parametrize("path", COUNTS)
def test_a_count_of_another_type_is_refused_not_converted(project, path, written, message):
    key = path.rsplit(".", 1)[-1].split("[")[0]
    assert _refusal(project, COUNTS[path](written)) == f"{F}: {path}: {message.format(key=key)}"


@pytest.mark.parametrize("path, word, text", [
    ("benchmark.enabled", "yes", _with(SECTION, "  dynamo-lab:benchmark:\n    enabled: yes\n")),
    ("graph.networkPolicy", "on", _with(SECTION, "  dynamo-lab:graph:\n    networkPolicy: on\n")),
    ("modelCache.prePull.enabled", "no",
     _with(SECTION, "  dynamo-lab:modelCache:\n    prePull:\n      enabled: no\n")),
])
def test_a_yaml_1_1_boolean_is_text_and_refused_with_what_pulumi_reads(project, path, word, text):
    key = path.rsplit(".", 1)[1]
    assert _refusal(project, text) == (
        f"{F}: {path}: {word!r} is not true or false: Pulumi's YAML reader (YAML 1.2) reads only true and false "
        f"as booleans, and yes, no, on and off as text; write `{key}: true` or `{key}: false`")


def test_a_fraction_takes_a_whole_number_and_the_cache_mode_takes_off(project):
    # A float is written as an int where it is whole (`efficiency: 1`), as JSON cannot tell them apart;
    # `mode: off` is the word to YAML 1.2, `false` the boolean the mode also takes.
    for mode in ("off", "false"):
        (project / "Pulumi.ok.yaml").write_text(_with(SECTION, "  dynamo-lab:sizing:\n    link:\n      efficiency: 1\n"
                                                      f"  dynamo-lab:modelCache:\n    mode: {mode}\n"))
        loaded = stack_files.load("ok", project)
        assert loaded.config.sizing.link.efficiency == 1.0 and loaded.config.model_cache.mode == "off"


# --- names are text; a map or a list is no name ------------------------------------------------------

@pytest.mark.parametrize("path, text, message", [
    ("workers.prefill.gpuClass", STACK.replace("gpuClass: gpu-8gb", "gpuClass: 1"),
     "1 is a number, not text; write it in quotes: `gpuClass: \"1\"`"),
    ("graph.namespace", _with(SECTION, "  dynamo-lab:graph:\n    namespace: true\n"),
     "the boolean true is not text; if you meant the word, write it in quotes: `namespace: \"true\"`"),
    # Before validation the model's name was looked up among the built-in models: unhashable, a
    # TypeError traceback (the mutation test's find); so was a connector.
    ("model.name", _with(SECTION, "  dynamo-lab:model:\n    name: {value: Qwen/Qwen3-0.6B}\n"),
     "a map is not text; write it as a string, e.g. `name: \"...\"`"),
    ("model.name", _with(SECTION, "  dynamo-lab:model:\n    name: [Qwen/Qwen3-0.6B]\n"),
     "a list is not text; write it as a string, e.g. `name: \"...\"`"),
    ("workers.prefill.kvTransfer.connector", _with(PREFILL, "      kvTransfer: {connector: [NixlConnector]}\n"),
     "a list is not allowed; write one of 'NixlConnector'"),
    ("workers.prefill.kvTransfer.transport", _with(PREFILL, "      kvTransfer: {transport: {tcp: 1}}\n"),
     "a map is not allowed; write one of 'tcp' or 'rdma'"),
    ("image", _with(SECTION, "  dynamo-lab:image: {repository: nvcr.io/nvidia/ai-dynamo/vllm-runtime}\n"),
     "a map is not text; write it as a string, e.g. `image: \"...\"`"),
    ("workers.prefill.extraArgs[1]", _with(PREFILL, "      extraArgs: [--max-num-seqs, 8]\n"),
     "8 is a number, not text; write it in quotes: `extraArgs: \"8\"`"),
])
def test_a_name_of_another_type_is_refused(project, path, text, message):
    assert _refusal(project, text) == f"{F}: {path}: {message}"


# --- sizes are quantities; a boolean is none ---------------------------------------------------------

@pytest.mark.parametrize("path, text, message", [
    ("workers.prefill.kvCacheBytes", STACK.replace("kvCacheBytes: 2Gi", "kvCacheBytes: true"),
     "the boolean true is not a Kubernetes quantity. Write bytes with a Kubernetes suffix, e.g. 3584Mi, 10Gi, "
     "272M, 1G"),
    ("workers.prefill.cpuRequest", _with(PREFILL, "      cpuRequest: false\n"),
     "the boolean false is not a Kubernetes CPU quantity. Write cores or millicores, e.g. 2, 0.5, 500m"),
    ("frontend.memory", _with(SECTION, "  dynamo-lab:frontend:\n    memory: [2Gi]\n"),
     "a list is not a Kubernetes quantity. Write bytes with a Kubernetes suffix, e.g. 3584Mi, 10Gi, 272M, 1G"),
    ("sizing.link.rate", _with(SECTION, "  dynamo-lab:sizing:\n    link:\n      rate: true\n"),
     "the boolean true is not a link rate; write e.g. 1gbit, 10gbit, 100mbit"),
    ("workers.prefill.kvCacheBytes", STACK.replace("kvCacheBytes: 2Gi", "kvCacheBytes: yes"),
     "'yes' is not a Kubernetes quantity. Write bytes with a Kubernetes suffix, e.g. 3584Mi, 10Gi, 272M, 1G"),
    # Five thousand digits were a ValueError from Fraction (Python's 4,300-digit limit) in the message.
    ("workers.prefill.kvCacheBytes", STACK.replace("kvCacheBytes: 2Gi", f"kvCacheBytes: {'9' * 5000}Gi"),
     f"'{'9' * 40}... (5,002 characters)' is more than Kubernetes allows in a quantity (2^63-1)"),
    # 400 digits of gbit are an infinite float: int() of it was an OverflowError traceback.
    ("sizing.link.rate", _with(SECTION, f"  dynamo-lab:sizing:\n    link:\n      rate: {'9' * 400}gbit\n"),
     f"'{'9' * 40}... (404 characters)' is not a link rate; write e.g. 1gbit, 10gbit, 100mbit"),
])
def test_a_size_of_another_type_is_refused(project, path, text, message):
    assert _refusal(project, text) == f"{F}: {path}: {message}"


@pytest.mark.parametrize("path, text", [
    ("gpuClasses.gpu-24gb.effectiveTflops",  # an infinite TFLOP/s divided a prefill's time by it: 0, a traceback
     _with(SECTION, "  dynamo-lab:gpuClasses:\n    gpu-24gb: {memory: 24564Mi, effectiveTflops: .inf, nodeSelector: "
           "[{key: nvidia.com/gpu.memory, operator: Gt, values: ['20000']}]}\n"
           "    gpu-8gb: {memory: 8188Mi, effectiveTflops: 15, nodeSelector: [{key: nvidia.com/gpu.memory, "
           "operator: Lt, values: ['12000']}]}\n")),
    ("sizing.link.efficiency", _with(SECTION, "  dynamo-lab:sizing:\n    link:\n      efficiency: .nan\n")),
])
def test_an_infinite_number_is_refused(project, path, text):
    word = "inf" if ".inf" in text else "nan"
    key = path.rsplit(".", 1)[1]
    assert _refusal(project, text) == (f"{F}: {path}: {word} is not a finite number; write one in digits, e.g. "
                                       f"`{key}: 0.5`")


# --- integers past 64 bits: refused as the file is read -------------------------------------------

RANGE = ("beyond the 64 bits in which Pulumi's YAML reader holds an integer (-9,223,372,036,854,775,808 to "
         "18,446,744,073,709,551,615); write the number you meant")


@pytest.mark.parametrize("digits", [21, 5000])
@pytest.mark.parametrize("path, line, edit", [
    ("config.dynamo-lab:workers[0].replicas", "line 14, column 17",
     lambda n: STACK.replace("      replicas: 1\n", f"      replicas: {n}\n")),
    ("config.dynamo-lab:frontend.replicas", "line 7, column 15",
     lambda n: _with(SECTION, f"  dynamo-lab:frontend:\n    replicas: {n}\n")),
    ("config.dynamo-lab:benchmark.concurrency[1]", "line 7, column 22",
     lambda n: _with(SECTION, f"  dynamo-lab:benchmark:\n    concurrency: [4, {n}]\n")),
    ("config.dynamo-lab:platform.values.replicas", "line 8, column 17",  # a map of any values: no schema type
     lambda n: _with(SECTION, f"  dynamo-lab:platform:\n    values:\n      replicas: -{n}\n")),
])
def test_an_integer_past_64_bits_is_refused_as_the_file_is_read(project, path, line, edit, digits):
    # Five thousand digits were a ValueError traceback: PyYAML's int() of them, past Python's limit of
    # 4,300 (and str() or json.dumps of one written out); 21 digits Pulumi's reader rounds to a float.
    message = _refusal(project, edit("9" * digits))
    assert message == f"{F}: `{path}` at {line} is an integer {digits:,} digits long, {RANGE}"


def test_every_reader_of_a_stack_file_refuses_an_integer_past_64_bits(project):
    # The root-run `up --local` and pr-preview read with the driver's reader (stack_overrides.py), and
    # write the workspace's file with safe_dump: refused before it, in the one line.
    from dynamo_lab.local_cluster import local

    (project / F).write_text(STACK.replace("      replicas: 1\n", f"      replicas: {'9' * 5000}\n"))
    with pytest.raises(local.LocalError) as caught:
        local.read_stack_file(project / F)
    assert str(caught.value) == (f"{F} cannot be read as a stack file (`config.dynamo-lab:workers[0].replicas` at "
                                 f"line 14, column 17 is an integer 5,000 digits long, {RANGE})")


def test_a_map_made_in_code_with_an_integer_past_64_bits_is_refused_by_name():
    # What advise and the tests build is handed over by config_from_doc: the same refusal, not
    # json.dumps' ValueError.
    with pytest.raises(stack_files.StackFileError) as caught:
        stack_files.config_from_doc({"dynamo-lab:workers": [{"name": "p", "replicas": 10**5000}]}, "Pulumi.made.yaml")
    assert str(caught.value) == (f"Pulumi.made.yaml: `dynamo-lab:workers[0].replicas` is an integer about 5,001 "
                                 f"digits long, {RANGE}")


@pytest.mark.parametrize("written, why", [
    ("18446744073709551616", "is an integer 20 digits long"),
    ("-9223372036854775809", "is an integer 19 digits long"),
    ("0x1" + "0" * 16, "is a hexadecimal integer 17 digits long"),
    ("0o" + "7" * 30, "is an octal integer 30 digits long"),
])
def test_the_64_bit_range_is_yaml_v3s(written, why):
    with pytest.raises(stack_files.StackFileError) as caught:
        stack_files.parse_yaml(f"x: {written}\n", "f")
    assert str(caught.value) == f"f: `x` at line 1, column 4 {why}, {RANGE}"
    assert bounded_read.int_out_of_range(2**64) and not bounded_read.int_out_of_range(2**64 - 1)


# --- a key written twice: Pulumi's reader refuses it, and so does the lab's -------------------------

@pytest.mark.parametrize("text, key, lines", [
    (STACK.replace("      replicas: 1\n", "      replicas: 1\n      replicas: 3\n"), "replicas", (14, 15)),
    (STACK.replace("      kvCacheBytes: 2Gi\n", "      kvCacheBytes: 2Gi\n      gpuClass: gpu-24gb\n"),
     "gpuClass", (15, 17)),
    (STACK + "  dynamo-lab:workers: []\n", "dynamo-lab:workers", (11, 22)),
    (_with(SECTION, "  dynamo-lab:graph: {networkPolicy: true, networkPolicy: false}\n"), "networkPolicy", (6, 6)),
    (_with(SECTION, "  dynamo-lab:platform:\n    values:\n      '1': a\n      1: b\n"), "1", (8, 9)),  # as written
    ("config: {}\nconfig: {}\n", "config", (1, 2)),
])
def test_a_key_written_twice_is_refused_naming_both_lines(project, text, key, lines):
    # PyYAML kept the last one silently; yaml.v3: `mapping key "replicas" already defined at line 14`.
    assert _refusal(project, text) == f"{F}: key `{key}` is written twice, at lines {lines[0]} and {lines[1]}; keep one"


def test_a_key_written_twice_stops_up_local_too(project):
    from dynamo_lab.local_cluster import local

    (project / F).write_text(STACK.replace("      replicas: 1\n", "      replicas: 1\n      replicas: 3\n"))
    with pytest.raises(local.LocalError) as caught:
        local.read_stack_file(project / F)
    assert str(caught.value) == (f"{F} cannot be read as a stack file (key `replicas` is written twice, at lines 14 "
                                 "and 15; keep one)")


def test_the_shipped_stacks_read_as_before():
    # No shipped file holds a YAML 1.1 boolean, a key twice or a 1.1-only number: each reads as it
    # always has (its goldens are held byte for byte elsewhere).
    import yaml

    from infra import catalogue

    # The project's own files only: a user's stack file beside them may hold what this test refuses.
    for stack in (*catalogue.SHIPPED_STACKS, *catalogue.EXAMPLE_STACKS):
        path = ROOT / f"Pulumi.{stack}.yaml"
        assert stack_files.read_yaml(path) == yaml.safe_load(path.read_text()), path.name

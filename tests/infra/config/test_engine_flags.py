"""extraArgs read as the worker's parsers read them (vLLM 0.31.0's FlexibleArgumentParser behind
Dynamo 1.6.1's): every spelling of a managed flag is refused at preview, with what it was read as and
the key to set; a group's own context length is taken in every spelling, the last one winning, and
the sizing uses what vLLM will. The engine tier runs the real parsers over the same spellings."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.config import engine_flags
from infra.errors import ConfigError
from infra.manifests.graph import deployment
from infra.resolved import Context, ContextSource
from tests.helpers import ROOT, examples, loaded, refused, sized

F = "Pulumi.cross-server.yaml"
KEY = f"{F}: workers.prefill.extraArgs: "


def _extra(args: list[str]):
    def edit(c: dict[str, Any]) -> None:
        c["workers"][0]["extraArgs"] = args
    return edit


def _refusal(args: list[str]) -> str:
    return str(refused("cross-server", _extra(args)))


# Several spellings per managed flag: its own, underscores, `=value`, a prefix argparse expands, a
# dotted JSON key, an alias, whitespace argparse keeps in a value and vLLM's types strip; each after a
# flag that is allowed, so the position does not matter. The engine tier runs each through the real
# parsers and checks that it changes the setting the flag names (or, for its EXITS, that they refuse it).
SPELLINGS = {
    "--kv-transfer-config": [
        ["--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'],
        ["--kv-transfer-config={}"], ["--kv_transfer_config", "{}"],
        ["--kv-transfer-config.kv_role", "kv_both"], ["--kv-transfer-config.kv_buffer_device=cuda"],
        ["--kv_transfer_config.kv_connector=NixlPushConnector"], ["--kv-transfer", "{}"],
        ["--kv-transfer.kv_role", "kv_both"],
        ['--kv-transfer-config= {"kv_connector":"NixlConnector","kv_role":"kv_both","kv_buffer_device":"cuda"}'],
        ['--kv-transfer-config.kv_buffer_device= "cuda"']],
    "--block-size": [["--block-size", "32"], ["--block_size=32"], ["--block", "32"], ["--block-s=32"],
                     ["--block-size= 32"], ["--block-s= 32"], ["--block_size=\t32"]],
    "--kv-cache-memory-bytes": [["--kv-cache-memory-bytes", "1G"], ["--kv_cache_memory_bytes=1G"],
                                ["--kv-cache-mem", "1G"], ["--kv-cache-memory-bytes= 8G"]],
    "--gpu-memory-utilization": [["--gpu-memory-utilization", "0.9"], ["--device-memory-utilization=0.9"],
                                 ["--gpu_memory_util", "0.9"], ["--gpu-memory-utilization=0.95 "]],
    "--num-gpu-blocks-override": [["--num-gpu-blocks-override", "100"], ["--num_gpu_blocks", "100"]],
    "--revision": [["--revision", "main"], ["--revision=main"], ["--rev", "main"]],
    "--tokenizer-revision": [["--tokenizer-revision", "main"], ["--tokenizer_rev=main"]],
    "--code-revision": [["--code_revision", "main"]],
    "--model": [["--model", "other/model"], ["--model=other/model"], ["--mod", "other/model"]],
    "--disaggregation-mode": [["--disaggregation-mode", "agg"], ["--disaggregation_mode=agg"]],
    "--kv-events-config": [["--kv-events-config", "{}"], ["--kv_events_config.enable_kv_cache_events", "false"]],
    "--tensor-parallel-size": [["-tp", "2"], ["-tp=2"], ["-t", "2"], ["--tensor_parallel_size", "2"],
                               ["--tensor-parallel", "2"], ["-tp= 2"], ["-t=2"]],
    "--pipeline-parallel-size": [["-pp", "2"], ["--pipeline_parallel_size=2"]],
    "--data-parallel-size": [["-dp", "2"], ["--data-parallel-size=2"]],
    "--data-parallel-size-local": [["-dpl", "2"], ["--data_parallel_size_local=2"]],
    "--prefill-context-parallel-size": [["-pcp", "2"], ["--prefill-context-parallel", "2"]],
    "--decode-context-parallel-size": [["-dcp", "2"]],
    "--nnodes": [["-n", "2"], ["-n2"], ["--nnodes= 2"]],
    "--hf-token": [["--hf-token", "hf_abc"], ["--hf_token=hf_abc"], ["--hf-tok", "hf_abc"], ["--hf-token= hf_abc"],
                   ["--hf_t", "hf_abc"]],
    "--hf-overrides": [["--hf-overrides", '{"num_key_value_heads": 4}'], ["--hf-overrides.head_dim", "64"]],
    "--hf-config-path": [["--hf-config-path", "/tmp/other"], ["--hf_config=/tmp/other"]],
    "--kv-cache-dtype": [["--kv-cache-dtype", "fp8"], ["--kv_cache_dtype=fp8"]],
    "--dtype": [["--dtype", "float16"], ["--dtype= float32"], ["--dty", "half"]],
    "--quantization": [["--quantization", "fp8"], ["-q", "fp8"], ["-qfp8"], ["-q fp8"], ["--quantization= fp8"]],
    "--quantization-config": [["--quantization-config", '{"ignore": ["lm_head"]}'],
                              ["--quantization-config.ignore+", "lm_head"]],
    "--cpu-offload-gb": [["--cpu-offload-gb", "4"], ["--cpu_offload_gb= 4"], ["--cpu-offload-g", "4"]],
    "--cpu-offload-params": [["--cpu-offload-params", "embed_tokens"]],
    "--offload-backend": [["--offload-backend", "uva"], ["--offload-b=prefetch"]],
    "--offload-group-size": [["--offload-group-size", "4"]],
    "--offload-num-in-group": [["--offload-num-in-group", "2"]],
    "--offload-prefetch-step": [["--offload-prefetch-step", "2"]],
    "--offload-params": [["--offload-params", "embed_tokens"]],
    "--kv-offloading-size": [["--kv-offloading-size", "4"], ["--kv_offloading_size= 4"]],
    "--kv-offloading-backend": [["--kv-offloading-backend", "lmcache"], ["--kv-offloading-b=lmcache"]],
    "--speculative-config": [["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2}'],
                             ["-sc", '{"method": "ngram"}'], ["--speculative-config.method", "ngram"]],
    "--spec-method": [["--spec-method", "ngram"]],
    "--spec-model": [["--spec-model", "other/draft"]],
    "--spec-tokens": [["--spec-tokens", "2"], ["--spec-tok= 2"]],
    "--enable-lora": [["--enable-lora"], ["--enable_lora"], ["--enable-lor"]],
    "--no-enable-prefix-caching": [["--no-enable-prefix-caching"], ["--no_enable_prefix_caching"],
                                   ["--no-enable-prefix-c"]],
    "--download-dir": [["--download-dir", "/tmp/models"], ["--download_dir=/tmp/models"]],
    "--config": [["--config", "flags.yaml"]],
}
# What FlexibleArgumentParser pulls from a file is `--config` exactly; argparse knows no --config, so
# these are its abbreviations of --config-format (no figure of the sizing's), let through.
NOT_THE_CONFIG_FILE = [["--config=flags.yaml"], ["--conf", "hf"], ["--config.x", "1"]]
REFUSED = [(flag, args) for flag, spellings in SPELLINGS.items() for args in spellings]


@pytest.mark.parametrize("flag, args", REFUSED, ids=[" ".join(a) for _, a in REFUSED])
def test_every_spelling_of_a_managed_flag_is_refused_with_what_it_sets(flag, args):
    # The check the extraArgs validator makes (its file and key before it: the tests above and below).
    msg = engine_flags.check(["--enforce-eager", *args])
    assert msg is not None, "let through"
    # As typed up to the option's name, never the value: `=...`, or `...` for one attached (`-qfp8`).
    typed = (args[0][:2] + "..." if args[0][:2] in engine_flags.SHORT_OPTIONS and len(args[0]) > 2
             and args[0][2] != "=" else args[0].split("=", 1)[0] + ("=..." if "=" in args[0] else ""))
    assert msg.startswith(repr(typed)), msg
    assert f"sets {flag}, " in msg, msg
    assert "hf_abc" not in msg, "a token is never shown"
    assert len(msg.splitlines()) == 1


def test_the_refusal_says_how_the_parser_reads_the_spelling():
    assert _refusal(["--block_size=32"]) == (
        f"{KEY}'--block_size=...', which vLLM reads as --block-size, sets --block-size, which dynamo-lab writes "
        "itself or its sizing rests on. Remove it: dynamo-lab writes --block-size 16, which its sizing rests on")
    assert _refusal(["--kv-cache-mem", "1G"]).startswith(
        f"{KEY}'--kv-cache-mem', a prefix vLLM's parser takes for --kv-cache-memory-bytes (argparse abbreviations), "
        "sets --kv-cache-memory-bytes")
    assert _refusal(["--kv-transfer-config.kv_role", "kv_both"]).startswith(
        f"{KEY}'--kv-transfer-config.kv_role', a dotted key that vLLM turns into a whole --kv-transfer-config JSON, "
        "sets --kv-transfer-config")
    assert _refusal(["--hf-token", "hf_abc"]) == (
        f"{KEY}'--hf-token' sets --hf-token, which would write the token into the pod spec in plain text. Remove it "
        "and set hfToken, a Pulumi secret, which reaches only what downloads from the Hub")


# --- the context length: the group's own, in any spelling, the last one winning -----------------

@pytest.mark.parametrize("args, tokens", [
    (["--max-model-len", "4096"], 4096), (["--max_model_len", "4096"], 4096), (["--max-model-len=4096"], 4096),
    (["--max-model", "4096"], 4096), (["--max_model=4k"], 4000), (["--max-model-len", "4K"], 4096),
    (["--max-model-len", "2.5k"], 2500),
    (["--max-model-len", "3000", "--enforce-eager", "--max-model-len", "4096"], 4096),
    (["--max-model-len=8192", "--max_model_len", "4096"], 4096),
    # whitespace argparse keeps in the value and vLLM's human_readable_int strips: a tab in the flag's
    # element, a space in the value's own (a space in the flag's element is refused: see the limits)
    (["--max_model_len=\t4096"], 4096), (["--max-model-len", " 4k"], 4000), (["--max-model-len", "4096 "], 4096),
])
def test_a_groups_own_context_is_taken_in_every_spelling_and_the_last_wins(args, tokens):
    stack = loaded("cross-server", _extra(args))
    cfg, sizing = stack.config, stack.sizing
    assert stack.resolved.context(cfg.workers[0]) == Context(tokens, ContextSource.EXTRA_ARGS)
    assert sizing.group("prefill").max_model_len == tokens
    (prefill,) = [c for c in deployment(stack.resolved, sizing)["spec"]["components"] if c["name"] == "prefill"]
    argv = prefill["podTemplate"]["spec"]["containers"][0]["args"]
    # dynamo-lab writes no context of its own beside the group's: the group's spelling is what vLLM reads.
    assert argv[-len(args):] == args
    assert engine_flags.value(argv, "--max-model-len") == args[-1].split("=")[-1]


@pytest.mark.parametrize("args, shown", [
    (["--max-model", "100"], "--max-model-len 100 (100 tokens) is shorter than"),
    (["--max_model_len=8192", "--max-model-len", "2048"], "--max-model-len 2048 (2,048 tokens) is shorter than"),
    (["--max-model-len", "-1"], "--max-model-len '-1' is not a token count"),
    (["--max-model=auto"], "--max-model-len 'auto' is not a token count"),
    (["--max-model-len.value", "4096"], "'--max-model-len.value', a dotted key that vLLM turns into a whole "
                                        "--max-model-len JSON, is not a token count"),
])
def test_a_context_in_any_spelling_is_checked_like_the_others(args, shown):
    assert shown in _refusal(args)


# Flags no figure of the sizing depends on, let through as typed: the pool is pinned, so the batch
# limits change neither it nor the host floor (the sizing's concurrency is workload.concurrency);
# turning prefix caching on is vLLM's default; `-r 0` is one two-character option with its value.
# The engine tier checks that every managed setting stays the sizing's with each.
PASS_THROUGH = [["--enforce-eager"], ["-O3"], ["-O", "3"], ["--max-num-seqs", "8"], ["--tokenizer", "Qwen/Qwen3-0.6B"],
                ["--kv-cache-dtype-skip-layers", "0"], ["--compilation-config.cudagraph_mode", "NONE"],
                ["--max_num_batched_tokens=4096"], ["--max-num-seqs", " 8"], ["--enable-prefix-caching"],
                ["--no-enable-lora"], ["-r 0"], ["--seed", " 7"]]


@pytest.mark.parametrize("args", PASS_THROUGH)
def test_flags_dynamo_lab_does_not_manage_pass_through(args):
    stack = loaded("cross-server", _extra(args))
    (prefill,) = [c for c in deployment(stack.resolved, stack.sizing)["spec"]["components"] if c["name"] == "prefill"]
    assert prefill["podTemplate"]["spec"]["containers"][0]["args"][-len(args):] == args


@pytest.mark.parametrize("args", NOT_THE_CONFIG_FILE)
def test_only_the_exact_config_element_is_the_flags_file(args):
    assert engine_flags.check(args) is None
    assert engine_flags.check(["--config", "flags.yaml"]).startswith("'--config' sets --config, ")


def test_values_that_look_like_flags_are_values():
    given = engine_flags.read(["--max-model-len", "-1", "-O3", "--x=--block-size"])
    assert [(g.name, g.value) for g in given] == [("--max-model-len", "-1"), ("--x", "--block-size")]


# --- any spelling a parser accepts, generated ------------------------------------------------------

def _spell(draw, option: str) -> list[str]:
    """One way of writing `option` that vLLM's or argparse's rules read as it."""
    if option.startswith("--"):
        name = option[2:]
        name = name[:draw(st.integers(1, len(name)))]  # a prefix (argparse abbreviations), or all of it
        name = "".join(c if c != "-" or not draw(st.booleans()) else "_" for c in name)  # `_` for `-`
        text = "--" + name + draw(st.sampled_from(["", ".kv_role", ".a.b", ".x+"]))  # dotted keys
    else:
        text = option[:draw(st.integers(2, len(option)))]
    if draw(st.booleans()):
        return [text + "=1"]
    return [text, "1"]


@st.composite
def managed_spellings(draw) -> tuple[str, list[str]]:
    # --config is FlexibleArgumentParser's exact element only (its other spellings are argparse's --config-format).
    flag = draw(st.sampled_from([m for m in engine_flags.MANAGED
                                 if m.options[0] not in (engine_flags.CONTEXT_FLAG, engine_flags.CONFIG_FILE_FLAG)]))
    return flag.options[0], _spell(draw, draw(st.sampled_from(flag.options)))


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spelling=managed_spellings(), before=st.sampled_from([[], ["--enforce-eager"], ["--max-num-seqs", "8"]]))
def test_no_spelling_of_a_managed_flag_gets_through(spelling, before):
    flag, args = spelling
    head = args[0].split("=")[0].split(".")[0]
    if ("--" + head[2:].replace("_", "-") if head.startswith("--") else head) in engine_flags.OPTIONS_WITHIN_MANAGED:
        return  # a prefix that is a flag of vLLM's own (--tokenizer of --tokenizer-revision, -dc): not managed
    with pytest.raises(ConfigError) as info:
        sized("cross-server", _extra([*before, *args]))
    assert "workers.prefill.extraArgs: " in str(info.value)


def test_the_configuration_page_names_every_managed_flag():
    page = (ROOT / "docs" / "configuration.md").read_text()
    start = page.index("\n## Engine flags\n")
    end = page.find("\n## ", start + 1)
    section = page[start:end if end >= 0 else len(page)]
    assert [m.options for m in engine_flags.MANAGED if not any(f"`{o}" in section for o in m.options)] == []


def test_a_token_written_as_one_element_is_refused_without_showing_it():
    msg = _refusal(["--hf-token hf_abc"])
    assert "is one element" in msg and "hf_abc" not in msg


# --- whitespace: judged as argparse reads it, not by the look of it ------------------------------

@pytest.mark.parametrize("arg, flag", [
    ("--kv-cache-memory-bytes= 8G", "--kv-cache-memory-bytes"), ("--block-size= 32", "--block-size"),
    ("--gpu-memory-utilization=0.95 ", "--gpu-memory-utilization"), ("-tp= 2", "--tensor-parallel-size"),
    ('--kv-transfer-config= {"kv_role": "kv_both"}', "--kv-transfer-config"), ("--block-s= 32", "--block-size"),
    ("-q fp8", "--quantization"), ("--kv-transfer-config.kv_role kv_both", "--kv-transfer-config"),
])
def test_an_element_with_whitespace_is_read_as_the_parser_reads_it(arg, flag):
    (given,) = [g for g in engine_flags.read([arg]) if g.flag is not None]
    assert given.flag.options[0] == flag
    assert f"sets {flag}, " in engine_flags.check([arg])


def test_a_flag_with_whitespace_is_refused_at_preview_naming_the_file_and_key():
    assert _refusal(["--block-size= 32"]).startswith(f"{KEY}'--block-size=...' sets --block-size, ")


@pytest.mark.parametrize("args", [["-r 0"], ["--seed", " 7"], ["--seed= 7"]])
def test_whitespace_in_a_flag_of_the_parsers_own_is_not_taken_for_one_element(args):
    """`-r 0` is argparse's two-character `-r` with its value attached, not a stray argument."""
    sized("cross-server", _extra(args))


# --- a secret flag's value, never shown --------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["--hf-tok hf_abc"], ["--hf_t hf_abc"], ["--hf-token hf_abc"], ["--max-model-len --hf-token=hf_abc"],
    ["--hf-token.x hf_abc"], ["--hf-tok", "hf_abc"], ["--hf_token= hf_abc"],
])
def test_a_token_in_any_spelling_is_never_shown_in_a_refusal(args):
    msg = _refusal(args)
    assert "hf_abc" not in msg and "hf-abc" not in msg, msg
    assert len(msg.splitlines()) == 1


@pytest.mark.parametrize("value", ["--hf-tok hf_abc", "--hf_token=hf_abc", {"a": "--hf-t hf_abc"}])
def test_a_token_in_extra_args_that_are_not_a_list_is_never_shown(value):
    msg = _refusal(value)
    assert "is not a list" in msg and "hf_abc" not in msg, msg


def test_masking_keeps_every_other_flag_as_typed():
    args = ["--max-num-seqs", "8", "--hf-tok", "hf_abc", "--hf_token=hf_x", "-q fp8", "--hf-t hf_y", "--seed", "7"]
    assert engine_flags.mask(args) == ["--max-num-seqs", "8", "--hf-tok", "...", "--hf_token=...", "-q fp8",
                                       "--hf-t ...", "--seed", "7"]


def test_a_dotted_key_typed_with_its_value_as_one_element_is_refused_as_what_vllm_reads():
    msg = _refusal(["--compilation-config.mode 3"])
    assert "is one element, so vLLM would read it as a dotted key whose name holds the space" in msg


# --- position: a managed flag is refused whatever stands before it (issue 43) --------------------
# Each element is judged on its own, as if argparse read it where it takes options: no element is
# skipped as the value an earlier one might take. `-1.5` is a negative number to argparse (Dynamo's
# parser gives it to the flag before it, --mm-prompt-template here) and a dotted JSON key to vLLM's
# FlexibleArgumentParser; the check once took it for the key, gave it the next element as its value,
# and never judged the managed flag behind it. The engine tier runs the same lists through the parsers.
BEFORE = [["--mm-prompt-template", "-1.5"], ["-1.5"], ["--seed", "-1"], ["--mm-prompt-template", "-.5"],
          ["--compilation-config.mode"], ["--compilation-config.mode", "3"], ["--"], ["-O"], ["--namespace"],
          ["--kv-transfer-config.kv_role"], ["--x.y+"], ["-1.5", "-2.5"], ["--served-model-name", "a b"]]
BEHIND = [["--kv-cache-dtype=fp8"], ["--block-size", "32"], ["--disaggregation-mode", "agg"],
          ["--kv_transfer_config", "{}"], ["--num-gpu-blocks-override", "100"], ["--dtype=float32"],
          ["--hf-token", "hf_abc"], ["-tp", "2"], ["--kv-cache-memory-bytes= 8G"], ["--model=other/model"]]
HIDDEN = [(before, behind) for before in BEFORE for behind in BEHIND]


@pytest.mark.parametrize("before, behind", HIDDEN, ids=[" ".join(b + a) for b, a in HIDDEN])
def test_a_managed_flag_is_refused_whatever_stands_before_it(before, behind):
    args = ["--enforce-eager", *before, *behind]
    msg = engine_flags.check(args)
    assert msg is not None, "let through"
    assert "hf_abc" not in msg and len(msg.splitlines()) == 1, msg
    # The managed element behind is read, and refused, on its own (what stands before it may be
    # refused first: a managed dotted key, a dotted key without `=`, `--`).
    (own,) = [g for g in engine_flags.read(args) if g.at == 1 + len(before)]
    assert own.flag is not None and engine_flags.refusal(own) == engine_flags.check(behind)


def test_the_issue_43_list_is_refused_at_preview_for_its_managed_flags():
    args = ["--mm-prompt-template", "-1.5", "--kv-cache-dtype=fp8", "--mm-prompt-template", "-1.5",
            "--hf-token", "hf_abc"]
    msg = _refusal(args)
    assert msg.startswith(f"{KEY}'--kv-cache-dtype=...' sets --kv-cache-dtype, "), msg
    assert "hf_abc" not in msg
    # Each managed element on its own, as the first one is removed.
    assert _refusal(args[:2] + args[3:]).startswith(f"{KEY}'--hf-token' sets --hf-token, ")


def test_every_element_is_read_none_is_skipped_as_a_value():
    given = engine_flags.read(["--mm-prompt-template", "-1.5", "--kv-cache-dtype=fp8", "--x.y", "--block-size"])
    assert [g.name for g in given] == ["--mm-prompt-template", "-1", "--kv-cache-dtype", "--x", "--block-size"]


@pytest.mark.parametrize("args, starts", [
    # vLLM's FlexibleArgumentParser gives a dotted key without `=` the next element, a flag or not,
    # and a negative decimal is such a key to it (Dynamo's parser, first, reads it as a number).
    (["--compilation-config.mode", "--max-num-seqs=8"], "'--compilation-config.mode' is a dotted JSON key"),
    (["--mm-prompt-template", "-1.5", "--max-model-len=4096"], "'-1.5' is a negative decimal, which vLLM's"),
    (["--seed", "7", "--compilation-config.mode"], "'--compilation-config.mode' is a dotted JSON key"),
    (["--enforce-eager", "--"], "'--' makes argparse read"),
    (["--", "--max-num-seqs", "8"], "'--' makes argparse read"),
])
def test_an_element_whose_reading_depends_on_its_place_is_refused(args, starts):
    msg = engine_flags.check(args)
    assert msg is not None and msg.startswith(starts), msg
    assert len(msg.splitlines()) == 1


@pytest.mark.parametrize("args", [["--compilation-config.mode", "3"], ["--compilation-config.mode", "-1"],
                                  ["--compilation-config.mode=3", "--max-num-seqs", "8"], ["--seed", "-1"],
                                  ["--seed", "-1", "--enforce-eager"]])
def test_a_dotted_key_with_its_value_and_negative_numbers_pass(args):
    assert engine_flags.check(args) is None


def test_a_negative_decimal_before_a_flag_is_refused_even_where_it_is_a_value():
    """vLLM takes `-1.5` here as the dotted key's value, but the element is judged on its own, as a
    dotted key before a flag: position-independence can only refuse more."""
    assert engine_flags.check(["--compilation-config.x", "-1.5", "--enforce-eager"]).startswith(
        "'-1.5' is a negative decimal, ")


# --- the scheduler limits the predictor reads: the same reader, vLLM's own types -----------------

@pytest.mark.parametrize("args, shown", [
    # vLLM 0.31.0 reads --max-num-seqs with int(): no suffix; both limits at least 1 (SchedulerConfig).
    (["--max-num-seqs", "8k"], "'--max-num-seqs' gives --max-num-seqs '8k'"),
    (["--max-num-batched-tokens", "0"], "'--max-num-batched-tokens' gives --max-num-batched-tokens '0'"),
    (["--max-num-batched-tokens", "2.5K"], "--max-num-batched-tokens '2.5K'"),
    (["--max-num-seqs", "-1"], "--max-num-seqs '-1'"), (["--max-num-seqs", "lots"], "--max-num-seqs 'lots'"),
    (["--max-num-seqs"], "--max-num-seqs no value"), (["--max-num-seqs", "--enforce-eager"], "--max-num-seqs no value"),
    (["--max-num-batched=auto", "--max-num-batched-tokens", "4096"], "--max-num-batched-tokens 'auto'"),
    (["--max-num-seqs.x", "3"], "a dotted key"),
    # prefixes vLLM's parser finds ambiguous (--max-num-scheduled-tokens, --max-logprobs, ...): it exits
    (["--max-num-s", "8"], "'--max-num-s' is a prefix of --max-num-seqs and of other flags of vLLM's"),
    (["--max", "4096"], "'--max' is a prefix of --max-model-len, --max-num-batched-tokens, --max-num-seqs and"),
    # a space: Dynamo's parser, first, would take the element for the value of a flag of its own
    (["--max-num-seqs= 8"], "'--max-num-seqs= 8' holds a space"), (["--max-model-len= 4096"], "holds a space"),
])
def test_a_limit_vllm_would_not_run_with_is_refused_at_load(args, shown):
    msg = _refusal(args)
    assert msg.startswith(KEY) and shown in msg, msg
    assert len(msg.splitlines()) == 1

"""extraArgs lists for the engine tier's property test (test_overrides.py,
test_every_list_the_check_takes_runs_with_the_stacks_settings), generated with hypothesis: elements
whose reading depends on what stands before them (flags that take a value, Dynamo's and its router's
among them, negative and decimal numbers, `--`, `=`, dotted JSON keys, `-O`, whitespace, a flags
file), mixed with the managed flags in every spelling the parsers accept (`_` for `-`, `=value`,
argparse prefixes, aliases such as -tp, dotted keys, whitespace), the group's own context and the
scheduler limits the predictor reads.

The lists are drawn before the checker runs, all at once, so that one checker process (importing
vLLM takes most of a minute) reads them all: hypothesis draws them here from a fixed seed, so every
run draws the same ones; DYNAMO_LAB_POSITIONS_SEED and DYNAMO_LAB_POSITIONS_EXAMPLES draw others.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from infra.config import engine_flags

SEED = int(os.environ.get("DYNAMO_LAB_POSITIONS_SEED", "43"))  # issue 43
EXAMPLES = int(os.environ.get("DYNAMO_LAB_POSITIONS_EXAMPLES", "400"))
# A flags file FlexibleArgumentParser would read (`--config FLAGS_FILE`): the checker runs where the
# engine fixture writes it, and it sets what dynamo-lab manages.
FLAGS_FILE = "flags.yaml"
FLAGS_FILE_TEXT = "block-size: 32\nkv-cache-dtype: fp8\n"

# A value for each managed flag other than the cross-server prefill worker's own, so that a flag
# that got through shows in what the parsers took; "" for a flag that takes none.
CHANGED = {"--model": "other/model", "--disaggregation-mode": "agg",
           "--kv-transfer-config": '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}',
           "--kv-events-config": '{"enable_kv_cache_events":false}', "--kv-cache-memory-bytes": "1G",
           "--gpu-memory-utilization": "0.5", "--num-gpu-blocks-override": "100", "--block-size": "32",
           "--revision": "main", "--tokenizer-revision": "main", "--code-revision": "main",
           "--download-dir": "/tmp/models", "--hf-token": "hf_abc", "--hf-overrides": '{"head_dim":64}',
           "--hf-config-path": "/tmp/other", "--kv-cache-dtype": "fp8", "--dtype": "float32",
           "--quantization": "fp8", "--quantization-config": "{}", "--cpu-offload-gb": "4",
           "--kv-offloading-size": "4", "--speculative-config": '{"method":"ngram"}', "--enable-lora": "",
           "--no-enable-prefix-caching": "", "--tensor-parallel-size": "2", "--pipeline-parallel-size": "2",
           "--data-parallel-size": "2", "--nnodes": "2"}
# Dotted keys of the managed JSON flags, with a value.
DOTTED = [("--kv-transfer-config.kv_role", "kv_both"), ("--kv-transfer-config.kv_connector", "LMCacheConnectorV1"),
          ("--hf-overrides.head_dim", "64"), ("--kv-events-config.enable_kv_cache_events", "false"),
          ("--speculative-config.method", "ngram")]
# Flags of the parsers' own that take a value (vLLM's, Dynamo's, its router's), each with values it
# takes, the tricky ones among them (a negative decimal, a space): what stands before a managed flag.
VALUE_FLAGS = {"--seed": ["-1", "7", "0"], "--max-logprobs": ["-1", "20"],
               "--mm-prompt-template": ["-1.5", "-.5", "a b", "fp8", "-1", " 8", "{}"],  # Dynamo's
               "--namespace": ["-1.5", "agg", "a b"],  # Dynamo's
               "--router-temperature": ["-1.5", "-.5", "0.9", "-1"],  # its router's
               "--served-model-name": ["a b", "agg", "-1.5"], "--additional-config.note": ["-1.5", "a b", "x"]}
# Values on their own: what a flag before them may take, or not.
VALUES = ["-1", "-7", "-1.5", "-.5", "1.5", "0.9", "7", "32", "fp8", "agg", "{}", " 8", "a b", "-", "auto",
          "--block-size", "-1e3"]
OTHERS = [["--enforce-eager"], ["-O3"], ["-O", "3"], ["-O"], ["--"], ["--compilation-config.mode"],
          ["--compilation-config.mode", "3"], ["--compilation-config.mode=3"],
          ["--compilation_config.cudagraph_mode=NONE"], ["--x.y+", "a,b"], ["--config", FLAGS_FILE],
          ["--config=" + FLAGS_FILE], ["--enable-prefix-caching"], ["--kv-cache-dtype-skip-layers", "0"],
          ["--tokenizer", "Qwen/Qwen3-0.6B"], ["-r", "0"], ["-r 0"]]
# The group's own context and the scheduler limits: spellings (prefixes ambiguous or not) and values.
READ_SPELLINGS = {"--max-model-len": ["--max-model-len", "--max_model_len", "--max-model", "--max-m", "--max"],
                  "--max-num-seqs": ["--max-num-seqs", "--max_num_seqs", "--max-num-se", "--max-num-s", "--max-num"],
                  "--max-num-batched-tokens": ["--max-num-batched-tokens", "--max_num_batched_tokens",
                                               "--max-num-b", "--max-num-batched"]}
READ_VALUES = {"--max-model-len": ["4096", "8192", "4k", " 4096", "auto", "-1", "100"],
               "--max-num-seqs": ["8", "64", "8k", " 16", "0", "-1"],
               "--max-num-batched-tokens": ["8192", "8k", "4K", "2.5k", "0"]}


@st.composite
def _managed(draw) -> list[str]:
    """A managed flag in one of the spellings the parsers accept, with a value that changes it."""
    flag = draw(st.sampled_from([m for m in engine_flags.MANAGED
                                 if m.options[0] not in (engine_flags.CONTEXT_FLAG, engine_flags.CONFIG_FILE_FLAG)]))
    value = CHANGED.get(flag.options[0], "2")
    option = draw(st.sampled_from(flag.options))
    if draw(st.integers(0, 5)) == 0 and flag.options[0] in [k.split(".")[0] for k, _ in DOTTED]:
        key, dotted = draw(st.sampled_from([d for d in DOTTED if d[0].startswith(flag.options[0] + ".")]))
        return [key + "=" + dotted] if draw(st.booleans()) else [key, dotted]
    if option.startswith("--"):
        name = option[2:]
        name = name[:draw(st.sampled_from([len(name), len(name), max(3, len(name) - 4), max(1, len(name) // 2)]))]
        name = "".join("_" if c == "-" and draw(st.booleans()) else c for c in name)
        text = "--" + name
    else:  # an alias, or a prefix of it (`-t` for `-tp`)
        text = draw(st.sampled_from([option, option[:2]]))
    if not value:
        return [text]
    how = draw(st.sampled_from(["two", "two", "=", "= ", "=\t", "attached", "space"]))
    if how == "=":
        return [f"{text}={value}"]
    if how in ("= ", "=\t"):
        return [f"{text}={how[1]}{value}"]
    if how == "attached" and not text.startswith("--"):
        return [text + value]  # `-qfp8`, `-tp2`
    if how == "space":
        return [f"{text} {value}"]
    return [text, value]


@st.composite
def _read(draw) -> list[str]:
    """The group's own context or a scheduler limit, in a spelling, with a value, readable or not."""
    flag = draw(st.sampled_from(sorted(READ_SPELLINGS)))
    text, value = draw(st.sampled_from(READ_SPELLINGS[flag])), draw(st.sampled_from(READ_VALUES[flag]))
    how = draw(st.sampled_from(["two", "two", "=", "= "]))
    return [text, value] if how == "two" else [f"{text}{how}{value.strip() if how == '=' else value}"]


@st.composite
def _valued(draw) -> list[str]:
    """One of the parsers' own flags with a value it takes, as two elements or after `=`."""
    flag = draw(st.sampled_from(sorted(VALUE_FLAGS)))
    value = draw(st.sampled_from(VALUE_FLAGS[flag]))
    return [flag, value] if draw(st.integers(0, 3)) else [f"{flag}={value}"]


# Weighted by repeating: a stray value or a flag without one makes most lists exit (argparse:
# "unrecognized arguments"), which says nothing of the settings; a few keep the parsers' reading of
# what follows them in play.
_ELEMENTS = st.one_of(
    _managed(), _managed(), _read(), _read(), _valued(), _valued(), _valued(), _valued(),
    st.sampled_from(VALUES).map(lambda v: [v]),
    st.sampled_from(sorted(VALUE_FLAGS)).map(lambda f: [f]),  # its value, if any, what follows
    st.sampled_from(OTHERS), st.sampled_from(OTHERS),
)


def extra_args() -> st.SearchStrategy[list[str]]:
    """One group's extraArgs: a few of the pieces above, in any order."""
    return st.lists(_ELEMENTS, min_size=1, max_size=6).map(lambda parts: [e for part in parts for e in part])


def drawn(examples: int = EXAMPLES, at: int = SEED) -> list[list[str]]:
    """`examples` lists drawn by hypothesis seeded with `at`, each once, in the order it drew them."""
    out: list[list[str]] = []

    @seed(at)
    @settings(max_examples=examples, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(extra_args())
    def draw(args: list[str]) -> None:
        if args not in out:
            out.append(args)

    draw()
    return out

"""The engine tier, overrides: a group's extraArgs judged as Dynamo's and vLLM's parsers judge them.
Each spelling the fast tier refuses would have changed the worker (so the refusal is not idle), each
list it lets through leaves every managed setting the sizing's, and over hypothesis's drawn lists
(tests/engine/positions.py) no taken list runs with another setting (python3 dev.py test-engine)."""

from __future__ import annotations

import pytest

from infra.config import engine_flags
from infra.config.fields import vllm_int
from infra.errors import ConfigError
from tests.engine import positions
from tests.engine.checked import (
    ACCEPTED,
    ALLOWED_CONTEXTS,
    EXITS,
    FIELD,
    OVERRIDE_GROUP,
    OVERRIDE_STACK,
    PLACED,
    REFUSED,
    SMUGGLED,
    changed_setting,
    describe,
    drawn_summary,
    drawn_verdicts,
    effective,
    extra_args,
    off_sizing,
)
from tests.helpers import sized

pytestmark = pytest.mark.engine



def test_a_groups_own_context_in_any_spelling_is_what_vllm_takes(engine):
    for i, args in enumerate(ALLOWED_CONTEXTS):
        key = f"override/allowed/{i}"
        assert (OVERRIDE_STACK, key) not in engine.render_errors, engine.render_errors.get((OVERRIDE_STACK, key))
        r = engine.results[key]
        assert r["ok"], describe(key, r)
        assert r["parsed"]["max_model_len"] == engine.sized[key][2].max_model_len == vllm_int(
            engine_flags.value(args, "--max-model-len")), (args, describe(key, r))


@pytest.mark.parametrize("key", list(REFUSED), ids=[" ".join(a) for _, a in REFUSED.values()])
def test_a_refused_spelling_is_refused_at_preview_and_would_have_changed_the_worker(engine, key):
    flag, args = REFUSED[key]
    with pytest.raises(ConfigError, match=f"sets {flag}, "):
        sized(OVERRIDE_STACK, extra_args(OVERRIDE_GROUP, args))
    # By the real parsers: the setting the flag names takes another value than the worker's own,
    # or, for the spellings EXITS names, the parsers refuse the command and the worker exits.
    r, base = engine.results[key], engine.results[f"{OVERRIDE_STACK}/shipped/{OVERRIDE_GROUP}"]
    if tuple(args) in EXITS:
        assert not r["ok"], f"{' '.join(args)}: the parsers took it: {changed_setting(engine, key)}"
        return
    assert r["ok"], f"{' '.join(args)}: {changed_setting(engine, key)}"
    name = FIELD.get(flag, flag.lstrip("-").replace("-", "_"))
    mine, theirs = effective(r["parsed"]), effective(base["parsed"])
    assert mine[name] != theirs[name], \
        f"{' '.join(args)} leaves {name} {theirs[name]!r}: {changed_setting(engine, key)}"


@pytest.mark.parametrize("key", list(ACCEPTED), ids=[" ".join(a) for a in ACCEPTED.values()])
def test_a_flag_let_through_leaves_every_managed_setting_the_sizing_s(engine, key):
    assert (OVERRIDE_STACK, key) not in engine.render_errors, engine.render_errors.get((OVERRIDE_STACK, key))
    r = engine.results[key]
    assert r["ok"], describe(key, r)
    assert off_sizing(engine, key) == ""


def test_the_normalization_rests_on_the_parsers_as_they_are(engine):
    """engine_flags' assumptions about the two parsers: vLLM's takes abbreviations, every managed
    flag is one of theirs (`--config` is FlexibleArgumentParser's own step), and the parsers' flags
    that are a prefix of a managed one are exactly OPTIONS_WITHIN_MANAGED."""
    real = set(engine.options["vllm"]) | set(engine.options["dynamo"])
    assert engine.options["vllm_allow_abbrev"] is True
    managed = {o for m in engine_flags.MANAGED for o in m.options}
    assert managed - real == {"--config"}
    within = {r for r in real - managed for m in managed
              if m.startswith(r) and r.startswith("--") == m.startswith("--")}
    assert within == set(engine_flags.OPTIONS_WITHIN_MANAGED)
    # argparse takes a two-character option with its value attached (`-qfp8`, `-q fp8`).
    assert {o for o in engine.options["vllm"] if len(o) == 2 and o[1] != "-"} == set(engine_flags.SHORT_OPTIONS)


def test_the_flags_whose_values_are_read_resolve_as_vllm_resolves_them(engine):
    """The context and the scheduler limits are vLLM's options, none of the parsers' options is a
    prefix of them, and UNIQUE_PREFIX is the shortest prefix vLLM's argparse takes for each: every
    shorter one is a prefix of another of vLLM's options too; no option of Dynamo's or of its
    router's parser (which takes abbreviations) starts with it, so neither takes those first."""
    vllm, others = set(engine.options["vllm"]), set(engine.options["dynamo"]) | set(engine.options["router"])
    assert engine.options["router_allow_abbrev"] is True
    read = {engine_flags.CONTEXT_FLAG, *(r.option for r in engine_flags.READ)}
    assert set(engine_flags.UNIQUE_PREFIX) == read and read <= vllm
    assert {o for o in vllm | others for f in read if f.startswith(o) and f != o} == set()
    shortest = {f: next(f[:n] for n in range(3, len(f) + 1) if [o for o in vllm if o.startswith(f[:n])] == [f])
                for f in read}
    assert shortest == engine_flags.UNIQUE_PREFIX
    assert [o for o in others for p in shortest.values() if o.startswith(p)] == []


def test_the_issue_43_list_would_change_the_worker_and_is_refused_at_preview(engine):
    """The list the check once let through, by the real parsers: every managed flag behind `-1.5`
    changes the worker; the project now refuses it, the token never shown."""
    with pytest.raises(ConfigError, match="sets --disaggregation-mode, ") as info:
        sized(OVERRIDE_STACK, extra_args(OVERRIDE_GROUP, SMUGGLED))
    assert "hf_abc" not in str(info.value)
    r, base = engine.results["smuggled"], engine.results[f"{OVERRIDE_STACK}/shipped/{OVERRIDE_GROUP}"]
    assert r["ok"], r["error"]
    mine, theirs = effective(r["parsed"]), effective(base["parsed"])
    changed = {k: mine[k] for k in mine if mine[k] != theirs[k]}
    assert changed.pop("kv_transfer")[:2] == ("LMCacheConnectorV1", "kv_both")
    assert changed == {"disaggregation_mode": "agg", "block_size": 32, "kv_cache_dtype": "fp8",
                       "num_gpu_blocks_override": 100, "dtype": "float32", "hf_token_given": True}


@pytest.mark.parametrize("key", list(PLACED))
def test_an_element_read_by_its_place_is_refused_where_vllm_reads_another_value(engine, key):
    """What the elements say on their own (the last --max-model-len, 8192) is not what vLLM takes."""
    with pytest.raises(ConfigError, match="workers.prefill.extraArgs: "):
        sized(OVERRIDE_STACK, extra_args(OVERRIDE_GROUP, PLACED[key]))
    r = engine.results[key]
    assert r["ok"], r["error"]
    assert r["parsed"]["max_model_len"] == 4096


def test_every_list_the_check_takes_runs_with_the_stacks_settings(engine):
    """The property (issue 43): for every generated extraArgs list the project takes, Dynamo's and
    vLLM's parsers give each managed setting the stack's value (context, block size, pool, GPU
    share, KV transfer and events, cache dtype, dtype, parallelism, model, no Hub token, ...) and the
    scheduler limits the predictor reads; or they exit, so that nothing runs with another. The lists
    (tests/engine/positions.py) put what may take a value before the managed flags in every spelling."""
    run = engine
    verdicts = drawn_verdicts(run)
    assert len(run.drawn) >= positions.EXAMPLES // 2, "hypothesis drew too few distinct lists"
    # Each kind is met often enough (seed 43: 67 taken lists run, 73 refused ones would change a
    # managed setting): else the property says little.
    assert len(verdicts["taken"]) - len(verdicts["taken, the parsers exit"]) >= len(run.drawn) // 8, \
        drawn_summary(run)
    assert len(verdicts["refused, a managed setting would change"]) >= len(run.drawn) // 8, drawn_summary(run)
    wrong = {}
    for key in verdicts["taken"]:
        if key in verdicts["taken, the parsers exit"]:
            continue
        if off := off_sizing(run, key):
            wrong[key] = (engine_flags.mask(run.drawn[int(key.split("/")[1])]), off)
    # The shortest first: the smallest lists that show it.
    assert sorted(wrong.values(), key=lambda w: len(w[0])) == [], drawn_summary(run)

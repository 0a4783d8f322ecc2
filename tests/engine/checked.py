"""The engine tier's one checker run, shared by its test modules: what is rendered and sent to
tests/engine/check_workers.py (each shipped stack's workers and variants, the bite probes, the
override lists, the property test's drawn lists), the report it gives back, and how a result is
read (`effective`, `assumed`, `describe`). The `engine` fixture runs it once a session."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

from infra.config import engine_flags
from infra.errors import ConfigError
from infra.manifests.graph import KV_ROLE, deployment
from tests.engine import model, positions
from tests.helpers import STACKS, everything_on, loaded, main_container, sized, unavailable
from tests.infra.config.test_engine_flags import NOT_THE_CONFIG_FILE, PASS_THROUGH, SPELLINGS

CHECKER = Path(__file__).with_name("check_workers.py")
WORKER_COMMAND = ["python3", "-m", "dynamo.vllm"]
# What a checker run may take: the imports (about a minute on 2 cores) and a second or so a worker.
CHECKER_TIMEOUT_S = 900


def _workload(**values: Any) -> Callable[[str], Callable[[dict[str, Any]], None]]:
    def edit(c: dict[str, Any]) -> None:
        c.setdefault("workload", {}).update(values)
    return lambda stack: edit


def _round_robin(stack: str) -> Callable[[dict[str, Any]], None]:
    def edit(c: dict[str, Any]) -> None:
        c.setdefault("frontend", {})["routerMode"] = "round-robin"  # no --kv-events-config
    return edit


def _own_context(stack: str) -> Callable[[dict[str, Any]], None]:
    def edit(c: dict[str, Any]) -> None:
        for group in c["workers"]:  # a group's own --max-model-len, honoured instead of the derived one
            group["extraArgs"] = [*group.get("extraArgs", []), "--max-model-len", "4096"]
    return edit


# Variants of every shipped stack, as edits of its config: name -> (stack -> edit, or None: as shipped).
VARIANTS: dict[str, Optional[Callable[[str], Callable[[dict[str, Any]], None]]]] = {
    "shipped": None,
    "everything-on": everything_on,  # the benchmark and the probe
    "round-robin": _round_robin,
    "long-requests": _workload(inputTokens=6000, outputTokens=1000),
    "max-model-len-8192": _workload(maxModelLen=8192),
    "own-max-model-len": _own_context,
}
CASES = [(stack, variant) for stack in STACKS for variant in VARIANTS]
# The stack beyond the lab (two 8-GPU nodes, RDMA, Qwen3-32B at tensorParallel 2), checked as shipped.
EXAMPLE_STACK = "two-node-rdma"


def render(stack: str, edit: Optional[Callable[[dict[str, Any]], None]], model_dir: Path,
           name: str = model.NAME) -> dict[str, list[str]]:
    """Each worker component's rendered argv after `python3 -m dynamo.vllm`, --model -> model_dir."""
    stack_loaded = loaded(stack, edit)
    cfg, sizing = stack_loaded.config, stack_loaded.sizing
    assert cfg.model.name == name, f"the engine tier carries {name}'s config.json for {stack}"
    out = {}
    for component in deployment(stack_loaded.resolved, sizing)["spec"]["components"]:
        if component["type"] == "frontend":
            continue
        main = main_container(component)
        assert main["command"] == WORKER_COMMAND
        argv = list(main["args"])
        at = argv.index("--model") + 1
        assert argv[at] == name
        argv[at] = str(model_dir)
        out[component["name"]] = argv
    return out


def worker_argvs(stack: str, variant: str, model_dir: Path) -> dict[str, list[str]]:
    make_edit = VARIANTS[variant]
    argvs = render(stack, make_edit(stack) if make_edit else None, model_dir)
    return {f"{stack}/{variant}/{name}": argv for name, argv in argvs.items()}


def context_of(group: str, tokens: int) -> Callable[[dict[str, Any]], None]:
    """An edit giving one worker group its own --max-model-len."""
    def edit(c: dict[str, Any]) -> None:
        g = next(g for g in c["workers"] if g["name"] == group)
        g["extraArgs"] = [*g.get("extraArgs", []), "--max-model-len", str(tokens)]
    return edit


def with_flag(argv: list[str], name: str, value: Optional[str]) -> list[str]:
    """argv with flag `name` set to `value` (appended if absent), or removed (value None)."""
    out = list(argv)
    while name in out:
        at = out.index(name)
        del out[at:at + 2]
    return out if value is None else out + [name, value]


def usable_tokens(pool_bytes: int) -> int:
    """The longest max_model_len a pool admits by vLLM 0.31.0's arithmetic, in ours: whole 16-token
    blocks of all layers' KV, less the null block vLLM's block pool holds back."""
    return (pool_bytes // model.BLOCK_BYTES - 1) * model.BLOCK_TOKENS


# The probes that prove the checks bite: the cross-server prefill worker (a 2 GiB pool), rendered with
# the longest context its pool holds, then its argv edited one token over, without --max-model-len
# (the renders before workers carried one), and with a connector Dynamo 1.6 does not take.
BITE_STACK, BITE_GROUP = "cross-server", "prefill"


# Override attempts on the cross-server prefill worker. Allowed: a group's own context in the
# spellings vLLM's parser takes, rendered by the project. Refused: every spelling the fast tier
# refuses (tests/infra/config/test_engine_flags.py), appended to the worker's rendered argv and
# parsed by the real parsers, to show what each would have changed.
OVERRIDE_STACK, OVERRIDE_GROUP = "cross-server", "prefill"
ALLOWED_CONTEXTS = [["--max-model-len", "4096"], ["--max_model_len", "4096"], ["--max-model-len=4k"],
                    ["--max-model", "4096"], ["--max_model=2.5k"],
                    ["--max-model-len", "8192", "--enforce-eager", "--max_model_len", "4096"],
                    # whitespace argparse keeps and vLLM's human_readable_int strips (a space in the
                    # flag's own element is refused: Dynamo's parser may take it for a value)
                    ["--max_model_len=\t4096"], ["--max-model-len", " 4096"], ["--max-model-len", "4096 "]]
REFUSED = {f"override/refused/{flag}/{i}": (flag, args) for flag, spellings in SPELLINGS.items()
           for i, args in enumerate(spellings)}
# Flags the fast tier lets through: rendered by the project, read by the real parsers, and every
# managed setting must still be the sizing's.
ACCEPTED = {f"override/accepted/{i}": args for i, args in enumerate(PASS_THROUGH + NOT_THE_CONFIG_FILE)}
# The setting each refused flag would change, as `effective` names it (the flag's own dest otherwise).
# `--config flags.yaml`: FlexibleArgumentParser reads the file the engine fixture writes there
# (positions.FLAGS_FILE_TEXT), whose kv-cache-dtype dynamo-lab's own flags do not override.
FIELD = {"--hf-token": "hf_token_given", "--kv-transfer-config": "kv_transfer", "--kv-events-config": "kv_events",
         "--no-enable-prefix-caching": "enable_prefix_caching", "--config": "kv_cache_dtype"}
# Refused spellings the parsers do not take at all, so the worker exits at start rather than run
# with a changed setting: the check refuses them as much as it refuses what they resemble.
EXITS = {
    ("--disaggregation_mode=agg",): "Dynamo's parser takes its flags by their exact names only",
    ("-t=2",): "argparse up to CPython 3.13.0 matches `-t=2` to no option",
    ("--mod", "other/model"): "a prefix of several of vLLM's options, which argparse calls ambiguous",
    ("--kv_transfer_config.kv_connector=NixlPushConnector",): "the dotted key replaces the whole JSON, which "
                                                                "vLLM's KVTransferConfig then refuses",
    ("--dtype= float32",): "argparse checks a choice against the value as typed, space and all",
}
# Issue 43: a list the check once let through. `-1.5` is a number to Dynamo's parser, which gives it
# to --mm-prompt-template; the check took it for a dotted JSON key, as vLLM's FlexibleArgumentParser
# would, and gave it the next element as its value, so the managed flag behind it went unjudged.
_HIDE = ["--mm-prompt-template", "-1.5"]
SMUGGLED = [*_HIDE, "--disaggregation-mode", "agg", *_HIDE, "--block-size", "32", *_HIDE, "--kv-cache-dtype=fp8",
            *_HIDE, "--kv-transfer-config", '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}',
            *_HIDE, "--num-gpu-blocks-override", "100", *_HIDE, "--dtype=float32", *_HIDE, "--hf-token", "hf_abc"]
# Lists whose reading depends on what stands before an element, refused for it: what vLLM takes
# differs from what the element says on its own.
PLACED = {
    # Dynamo's parser takes an element with a space for the value of its own --namespace
    "placed/space": ["--max-model-len", "4096", "--namespace", "--max-model-len= 8192"],
    # vLLM's FlexibleArgumentParser takes the flag for the dotted key's value
    "placed/dotted": ["--max-model-len=4096", "--additional-config.note", "--max-model-len=8192"],
}


@dataclass
class EngineRun:
    """The checker's report: package versions, each worker's result by id, the parsers' options."""
    versions: dict[str, str]
    results: dict[str, dict[str, Any]] = field(repr=False)
    render_errors: dict[tuple[str, str], str] = field(default_factory=dict, repr=False)
    probes: dict[str, list[str]] = field(default_factory=dict, repr=False)
    options: dict[str, Any] = field(default_factory=dict, repr=False)
    sized: dict[str, tuple[Any, Any, Any]] = field(default_factory=dict, repr=False)  # id -> (cfg, group, sizing)
    model_dir: str = ""
    example_dir: str = ""  # the example stack's model (EXAMPLE_STACK)
    drawn: list[list[str]] = field(default_factory=list, repr=False)  # the property test's lists, `drawn/<i>`

    def model_of(self, key: str) -> str:
        """The model directory a checked worker was given."""
        return self.example_dir if key.startswith(f"{EXAMPLE_STACK}/") else self.model_dir


def engine_python() -> str:
    path = os.environ.get("DYNAMO_LAB_ENGINE_PYTHON", "")
    if not Path(path or "/nonexistent").is_file():
        unavailable("no engine environment: run the engine tier with `python3 dev.py test-engine`")
    return path


@pytest.fixture(scope="session")
def engine(tmp_path_factory, engine_summary) -> EngineRun:
    """One checker run over every worker of every case, and the bite probes."""
    python = engine_python()
    work = tmp_path_factory.mktemp("engine")
    model_dir = model.write(work / "Qwen3-0.6B")
    workers: dict[str, list[str]] = {}
    render_errors = {}
    for stack, variant in CASES:
        try:
            workers.update(worker_argvs(stack, variant, model_dir))
        except ConfigError as exc:  # the project refused its own variant: reported by that case
            render_errors[(stack, variant)] = str(exc)
    base = render(BITE_STACK, None, model_dir)[BITE_GROUP]
    pool = int(base[base.index("--kv-cache-memory-bytes") + 1])
    transfer = json.loads(base[base.index("--kv-transfer-config") + 1])
    try:  # the project's own render of the longest context it allows
        fits = render(BITE_STACK, context_of(BITE_GROUP, usable_tokens(pool)), model_dir)[BITE_GROUP]
    except ConfigError as exc:
        render_errors[(BITE_STACK, "bite/fits")] = str(exc)
        fits = with_flag(base, "--max-model-len", str(usable_tokens(pool)))
    probes = {
        "bite/fits": fits,
        "bite/one-token-over": with_flag(fits, "--max-model-len", str(usable_tokens(pool) + 1)),
        "bite/no-max-model-len": with_flag(base, "--max-model-len", None),
        "bite/push-connector": with_flag(base, "--kv-transfer-config",
                                         json.dumps({**transfer, "kv_connector": "NixlPushConnector"})),
    }
    # What each checked worker's sizing assumed, for comparing the parsers' values with it.
    sized_for: dict[str, tuple[Any, Any, Any]] = {}
    for stack, variant in CASES:
        if (stack, variant) in render_errors:
            continue
        make_edit = VARIANTS[variant]
        cfg, sizing = sized(stack, make_edit(stack) if make_edit else None)
        sized_for.update({f"{stack}/{variant}/{g.name}": (cfg, g, sizing.group(g.name)) for g in cfg.workers})
    # The override group with its own flags, rendered by the project: a context (checked in full)
    # and the flags let through (their parse only).
    overrides = {**{f"override/allowed/{i}": args for i, args in enumerate(ALLOWED_CONTEXTS)}, **ACCEPTED}
    for key, args in overrides.items():
        try:
            workers[key], sized_for[key] = _override(args, model_dir)
        except ConfigError as exc:
            render_errors[(OVERRIDE_STACK, key)] = str(exc)
    # The example beyond the lab: Qwen3-32B at tensorParallel 2 (a rank's pool, a rank's KV heads).
    example_dir = model.write(work / "Qwen3-32B", model.EXAMPLE_NAME)
    for name, argv in render(EXAMPLE_STACK, None, example_dir, model.EXAMPLE_NAME).items():
        workers[f"{EXAMPLE_STACK}/shipped/{name}"] = argv
    cfg, sizing = sized(EXAMPLE_STACK)
    sized_for.update({f"{EXAMPLE_STACK}/shipped/{g.name}": (cfg, g, sizing.group(g.name)) for g in cfg.workers})
    parse_only = {key: base + args for key, (_, args) in REFUSED.items()}
    parse_only.update({"smuggled": base + SMUGGLED, **{k: base + args for k, args in PLACED.items()}})
    # The property test's lists: those the project takes rendered by it (their sizing is what the
    # parsers must give), those it refuses on the worker's rendered argv (to say what each would do).
    (work / positions.FLAGS_FILE).write_text(positions.FLAGS_FILE_TEXT)
    drawn = positions.drawn()
    build_only = {}
    for i, args in enumerate(drawn):
        key = f"drawn/{i}"
        try:
            build_only[key], sized_for[key] = _override(args, model_dir)
        except ConfigError as exc:
            render_errors[(OVERRIDE_STACK, key)] = str(exc)
            build_only[key] = base + args
    parse_only.update({key: workers.pop(key) for key in ACCEPTED if key in workers})
    request_file, report_file = work / "request.json", work / "report.json"
    request_file.write_text(json.dumps({"workers": [{"id": k, "argv": v} for k, v in {**workers, **probes}.items()]
                                        + [{"id": k, "argv": v, "parse_only": True} for k, v in parse_only.items()]
                                        + [{"id": k, "argv": v, "build_only": True} for k, v in build_only.items()]}))
    proc = subprocess.run([python, str(CHECKER), str(request_file), str(report_file)], cwd=work,
                          capture_output=True, text=True, timeout=CHECKER_TIMEOUT_S)
    assert proc.returncode == 0 and report_file.is_file(), f"check_workers.py failed:\n{proc.stdout}\n{proc.stderr}"
    report = json.loads(report_file.read_text())
    run = EngineRun(report["versions"], {w["id"]: w for w in report["workers"]}, render_errors, probes,
                    report["options"], sized_for, str(model_dir), str(example_dir), drawn)
    engine_summary.append(" ".join(f"{k} {v}" for k, v in run.versions.items()))
    engine_summary.extend(describe(k, r) for k, r in run.results.items()
                          if not k.startswith(("override/refused/", "override/accepted/", "drawn/")))
    same = "every managed setting the sizing's"
    engine_summary.extend(f"{k}: {' '.join(ACCEPTED[k])}: {off_sizing(run, k) or same}"
                          for k in ACCEPTED if k in run.results)
    engine_summary.extend(f"{k}: {' '.join(REFUSED[k][1])}: {changed_setting(run, k) or 'changed nothing'}"
                          for k in REFUSED)
    engine_summary.extend(f"{s}/{v}: the project refused it: {e}" for (s, v), e in render_errors.items()
                          if not v.startswith("drawn/"))
    engine_summary.append(drawn_summary(run))
    return run


def _override(args: list[str], model_dir: Path) -> tuple[list[str], tuple[Any, Any, Any]]:
    """The override group's worker argv with `args` appended to its extraArgs, rendered by the
    project, and what its sizing assumed (a ConfigError where the project refuses the list)."""
    edit = extra_args(OVERRIDE_GROUP, args)
    argv = render(OVERRIDE_STACK, edit, model_dir)[OVERRIDE_GROUP]
    cfg, sizing = sized(OVERRIDE_STACK, edit)
    g = next(g for g in cfg.workers if g.name == OVERRIDE_GROUP)
    return argv, (cfg, g, sizing.group(g.name))


def extra_args(group: str, args: list[str]) -> Callable[[dict[str, Any]], None]:
    def edit(c: dict[str, Any]) -> None:
        g = next(g for g in c["workers"] if g["name"] == group)
        g["extraArgs"] = [*g.get("extraArgs", []), *args]
    return edit


def _transfer(kv: Optional[dict[str, Any]]) -> Optional[tuple[Any, Any, Any]]:
    return None if kv is None else (kv.get("kv_connector"), kv.get("kv_role"), kv.get("kv_buffer_device"))


def effective(parsed: dict[str, Any]) -> dict[str, Any]:
    """What the parsers took for each setting dynamo-lab manages, KV configs reduced to what it sets;
    prefix caching and LoRA as on or off (vLLM's namespace leaves None for its default, which for
    prefix caching the engine's own config resolves to on: `prefix_caching` in the full check)."""
    out = {k: v for k, v in parsed.items() if k not in ("kv_transfer_config", "kv_events_config")}
    if "enable_prefix_caching" in parsed:
        out["enable_prefix_caching"] = parsed["enable_prefix_caching"] is not False
    if "enable_lora" in parsed:
        out["enable_lora"] = bool(parsed["enable_lora"])
    out["kv_transfer"] = _transfer(parsed["kv_transfer_config"])
    events = parsed["kv_events_config"]
    out["kv_events"] = None if events is None else (events.get("publisher"), events.get("endpoint"),
                                                    events.get("enable_kv_cache_events"))
    return out


def assumed(cfg: Any, group: Any, sizing: Any, model_dir: str) -> dict[str, Any]:
    """The same settings as dynamo-lab's config and sizing have them: what the worker must run with."""
    from infra.manifests.graph import KV_EVENTS_CONFIG
    kv = group.kv_transfer
    events = cfg.frontend.router_mode == "kv" and group.role in ("agg", "prefill")
    return {"model": model_dir, "revision": cfg.model.revision, "tokenizer_revision": None, "code_revision": None,
            "max_model_len": sizing.max_model_len, "block_size": 16, "kv_cache_memory_bytes": sizing.kv_cache_bytes,
            "gpu_memory_utilization": float(f"{sizing.gpu_memory_utilization:.2f}"), "num_gpu_blocks_override": None,
            "kv_cache_dtype": "auto", "tensor_parallel_size": group.tensor_parallel, "pipeline_parallel_size": 1,
            "data_parallel_size": 1, "download_dir": None, "hf_overrides": {}, "hf_token_given": False,
            # the checkpoint's own dtype, every weight on the GPU, one model, its prefix cache on
            "dtype": "auto", "quantization": None, "quantization_config": None, "hf_config_path": None,
            "cpu_offload_gb": 0, "cpu_offload_params": [], "offload_backend": "auto", "offload_group_size": 0,
            "offload_num_in_group": 1, "offload_prefetch_step": 1, "offload_params": [],
            "kv_offloading_size": None, "kv_offloading_backend": "native", "speculative_config": None,
            "spec_method": None, "spec_model": None, "spec_tokens": None, "enable_lora": False,
            "enable_prefix_caching": True, "data_parallel_size_local": None, "prefill_context_parallel_size": 1,
            "decode_context_parallel_size": 1, "nnodes": 1,
            # the scheduler limits: the group's own, as the predictor reads them, else vLLM's default (None here)
            "max_num_batched_tokens": engine_flags.count(group.extra_args, "--max-num-batched-tokens"),
            "max_num_seqs": engine_flags.count(group.extra_args, "--max-num-seqs"),
            "disaggregation_mode": group.role,
            "kv_transfer": None if group.role == "agg" else (kv.connector, KV_ROLE[group.role], kv.buffer_device),
            "kv_events": (KV_EVENTS_CONFIG["publisher"], KV_EVENTS_CONFIG["endpoint"], True) if events else None}


def changed_setting(run: EngineRun, key: str) -> str:
    """What a refused spelling would have changed, by the real parsers: the settings that differ from
    the worker's own, or the parsers' refusal ("" when neither)."""
    r, base = run.results[key], run.results[f"{OVERRIDE_STACK}/shipped/{OVERRIDE_GROUP}"]
    if not r["ok"]:
        return f"the worker would not start: {r['error']}"
    mine, theirs = effective(r["parsed"]), effective(base["parsed"])
    return ", ".join(f"{k} {theirs[k]!r} -> {v!r}" for k, v in mine.items() if v != theirs[k])


def off_sizing(run: EngineRun, key: str) -> str:
    """The managed settings a checked worker's parsers took other than its sizing assumed ("" if none)."""
    r = run.results[key]
    if not r["ok"]:
        return f"REFUSED by {r['stage']}: {r['error']}"
    got, want = effective(r["parsed"]), assumed(*run.sized[key], run.model_dir)
    return ", ".join(f"{k} {want[k]!r} -> {got.get(k)!r}" for k in want if got.get(k) != want[k])


def describe(worker_id: str, r: dict[str, Any]) -> str:
    """One worker's line: what vLLM parsed, the pool, and its verdict in Dynamo's or vLLM's words."""
    parsed = (r.get("parsed") or {}).get("max_model_len")
    given = "--block-size" if r.get("block_size_given") else "no --block-size: the backend's pick"
    block = f"{r.get('block_size')} ({given})"
    verdict = "passed" if r["ok"] else f"REFUSED by {r['stage']}: {r['error']}"
    return (f"{worker_id}: max_model_len {r.get('max_model_len')} (--max-model-len {parsed}), block_size {block}, "
            f"connector {r.get('connector')}, pool {r.get('pool_bytes')} B, {r.get('num_blocks')} blocks: {verdict}")


def _managed_changed(run: EngineRun, key: str) -> bool:
    """Whether a refused list, on the worker's rendered argv, changes a managed setting (the
    scheduler limits are not managed)."""
    mine = effective(run.results[key]["parsed"])
    theirs = effective(run.results[f"{OVERRIDE_STACK}/shipped/{OVERRIDE_GROUP}"]["parsed"])
    return any(mine[k] != theirs[k] for k in mine if k not in ("max_num_batched_tokens", "max_num_seqs"))


def drawn_verdicts(run: EngineRun) -> dict[str, list[str]]:
    """The property test's lists by verdict: taken (rendered), and of those the parsers exit on;
    refused, and of those the ones that would have changed a managed setting, or exited."""
    out: dict[str, list[str]] = {"taken": [], "taken, the parsers exit": [], "refused": [],
                                 "refused, a managed setting would change": [], "refused, the parsers exit": []}
    for i in range(len(run.drawn)):
        key = f"drawn/{i}"
        r = run.results[key]
        taken = (OVERRIDE_STACK, key) not in run.render_errors
        out["taken" if taken else "refused"].append(key)
        if not r["ok"]:
            out[f"{'taken' if taken else 'refused'}, the parsers exit"].append(key)
        elif not taken and _managed_changed(run, key):
            out["refused, a managed setting would change"].append(key)
    return out


def drawn_summary(run: EngineRun) -> str:
    counts = ", ".join(f"{len(keys)} {what}" for what, keys in drawn_verdicts(run).items())
    return (f"property test: {len(run.drawn)} extraArgs lists drawn by hypothesis (seed {positions.SEED}, "
            f"{positions.EXAMPLES} examples): {counts}")

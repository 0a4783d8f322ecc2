"""The engine tier: every worker command dynamo-lab renders, through Dynamo 1.6.1's and vLLM 0.31.0's
own code (python3 dev.py test-engine).

The tests run here, in .venv, and build each worker's command from the project's own builders: the
stack's config and sizing (`helpers.sized`), the DynamoGraphDeployment (`graph.deployment`), its
worker containers' `python3 -m dynamo.vllm ARGS`. The ARGS, --model pointed at a local directory
holding Qwen3-0.6B's config.json (tests/engine/model.py), go to tests/engine/check_workers.py, which
runs in the tier's own environment (.venv-engine, the real ai-dynamo, ai-dynamo-runtime and vllm
wheels as tests/engine/requirements.txt pins them): Dynamo's parser, vLLM's engine config, vLLM's
connector lookup and Dynamo's connector protocol, and vLLM's KV pool admission. Its docstring says
step by step which code is Dynamo's or vLLM's and which is ours (the per-layer KV spec, the
attention backend). One checker process for the whole tier: importing vLLM takes most of a minute.

Checked here, on a CPU, with no GPU and no hub: that a worker's flags parse, that its KV transfer
config builds and names a connector Dynamo 1.6 takes, and that vLLM admits its pinned KV pool for
its max_model_len (vLLM exits at start when the pool cannot hold one such sequence). Not checked:
anything a GPU decides (free memory, the attention backend's own pick, CUDA graphs), loading weights.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

from infra.errors import ConfigError
from infra.manifests.graph import deployment
from tests.engine import model
from tests.helpers import STACKS, everything_on, main_container, sized, unavailable

pytestmark = pytest.mark.engine

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


def render(stack: str, edit: Optional[Callable[[dict[str, Any]], None]], model_dir: Path) -> dict[str, list[str]]:
    """Each worker component's rendered argv after `python3 -m dynamo.vllm`, --model -> model_dir."""
    cfg, sizing = sized(stack, edit)
    assert cfg.model.name == model.NAME, "the engine tier carries Qwen3-0.6B's config.json only"
    out = {}
    for component in deployment(cfg, sizing)["spec"]["components"]:
        if component["type"] == "frontend":
            continue
        main = main_container(component)
        assert main["command"] == WORKER_COMMAND
        argv = list(main["args"])
        at = argv.index("--model") + 1
        assert argv[at] == model.NAME
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


@dataclass
class EngineRun:
    """The checker's report: package versions, and each worker's result by id."""
    versions: dict[str, str]
    results: dict[str, dict[str, Any]] = field(repr=False)
    render_errors: dict[tuple[str, str], str] = field(default_factory=dict, repr=False)
    probes: dict[str, list[str]] = field(default_factory=dict, repr=False)


def _engine_python() -> str:
    path = os.environ.get("DYNAMO_LAB_ENGINE_PYTHON", "")
    if not Path(path or "/nonexistent").is_file():
        unavailable("no engine environment: run the engine tier with `python3 dev.py test-engine`")
    return path


@pytest.fixture(scope="session")
def engine(tmp_path_factory, engine_summary) -> EngineRun:
    """One checker run over every worker of every case, and the bite probes."""
    python = _engine_python()
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
    request_file, report_file = work / "request.json", work / "report.json"
    request_file.write_text(json.dumps({"workers": [{"id": k, "argv": v} for k, v in {**workers, **probes}.items()]}))
    proc = subprocess.run([python, str(CHECKER), str(request_file), str(report_file)], cwd=work,
                          capture_output=True, text=True, timeout=CHECKER_TIMEOUT_S)
    assert proc.returncode == 0 and report_file.is_file(), f"check_workers.py failed:\n{proc.stdout}\n{proc.stderr}"
    report = json.loads(report_file.read_text())
    run = EngineRun(report["versions"], {w["id"]: w for w in report["workers"]}, render_errors, probes)
    engine_summary.append(" ".join(f"{k} {v}" for k, v in run.versions.items()))
    engine_summary.extend(describe(k, r) for k, r in run.results.items())
    engine_summary.extend(f"{s}/{v}: the project refused it: {e}" for (s, v), e in render_errors.items())
    return run


def describe(worker_id: str, r: dict[str, Any]) -> str:
    """One worker's line: what vLLM parsed, the pool, and its verdict in Dynamo's or vLLM's words."""
    parsed = (r.get("parsed") or {}).get("max_model_len")
    given = "--block-size" if r.get("block_size_given") else "no --block-size: the backend's pick"
    block = f"{r.get('block_size')} ({given})"
    verdict = "passed" if r["ok"] else f"REFUSED by {r['stage']}: {r['error']}"
    return (f"{worker_id}: max_model_len {r.get('max_model_len')} (--max-model-len {parsed}), block_size {block}, "
            f"connector {r.get('connector')}, pool {r.get('pool_bytes')} B, {r.get('num_blocks')} blocks: {verdict}")


def test_the_engine_environment_is_the_pinned_one(engine):
    assert engine.versions == {"ai-dynamo": "1.6.1", "ai-dynamo-runtime": "1.6.1", "vllm": "0.31.0", "torch": "2.13.0"}


@pytest.mark.parametrize("stack,variant", CASES, ids=[f"{s}-{v}" for s, v in CASES])
def test_every_worker_passes_dynamo_s_parser_and_vllm_s_kv_check(engine, stack, variant):
    assert (stack, variant) not in engine.render_errors, engine.render_errors.get((stack, variant))
    mine = {k: r for k, r in engine.results.items() if k.startswith(f"{stack}/{variant}/")}
    assert mine, "no workers rendered"
    refused = [describe(k, r) for k, r in mine.items() if not r["ok"]]
    assert refused == [], "\n".join(refused)
    # The sizing rests on 16-token blocks: the render must say so, not leave it to the GPU's backend.
    assert {k: (r["block_size"], r["block_size_given"]) for k, r in mine.items()} == {k: (16, True) for k in mine}


def test_a_pool_that_cannot_hold_max_model_len_is_refused_by_vllm(engine):
    fits, over, unset = (engine.results[f"bite/{k}"] for k in ("fits", "one-token-over", "no-max-model-len"))
    tokens = usable_tokens(fits["pool_bytes"])
    assert fits["ok"], describe("bite/fits", fits)
    assert fits["max_model_len"] == tokens and fits["num_blocks"] == tokens // model.BLOCK_TOKENS + 1
    for r, length in ((over, tokens + 1), (unset, model.CONFIG["max_position_embeddings"])):
        assert not r["ok"] and r["max_model_len"] == length
        message = f"To serve at least one request with the model's max seq len ({length})"
        assert message in r["error"], describe("bite", r)
        assert message in r["check_enough_kv_cache_memory"], "vLLM's check on its own refuses it too"


def test_the_sizing_refuses_a_context_exactly_where_vllm_does(engine):
    """The project's own check (config.checks, the sizing) and vLLM's draw the same line: the longest
    context a pool holds renders and starts; one token more is refused by both."""
    assert (BITE_STACK, "bite/fits") not in engine.render_errors, engine.render_errors.get((BITE_STACK, "bite/fits"))
    fits, over = engine.results["bite/fits"], engine.results["bite/one-token-over"]
    assert fits["ok"] and not over["ok"], (describe("bite/fits", fits), describe("bite/one-token-over", over))
    with pytest.raises(ConfigError, match=f"max_model_len {over['max_model_len']:,}"):
        sized(BITE_STACK, context_of(BITE_GROUP, over["max_model_len"]))


def test_a_connector_dynamo_does_not_support_is_refused_by_dynamo(engine):
    push = engine.results["bite/push-connector"]
    assert push["connector"] == "NixlPushConnector"  # vLLM built it and has the class (an earlier stage)
    assert push["stage"] == "dynamo.vllm.kv_connector_protocols.make_kv_connector_protocol", describe("push", push)
    assert push["error"].startswith("ValueError: Unsupported kv_connector='NixlPushConnector' for PD.")
    assert not push["nixl_side_channel_host_set"], "Dynamo sets the NIXL side channel only for NixlConnector"


def test_dynamo_sets_the_nixl_side_channel_host_for_every_disaggregated_worker(engine):
    disaggregated = {k: r for k, r in engine.results.items() if not k.startswith("bite/") and r.get("connector")}
    assert disaggregated
    assert {k: (r["connector"], r["nixl_side_channel_host_set"]) for k, r in disaggregated.items()} == {
        k: ("NixlConnector", True) for k in disaggregated}

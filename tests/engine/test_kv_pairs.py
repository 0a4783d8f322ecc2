"""The engine tier's proof of the prefill/decode pairing rule (infra/kv_ranks.py; the config's pair
check, infra/validate/topology.py): vLLM 0.31.0's own code (tests/engine/check_kv_pairs.py, which says
whose code runs) against the project, on a CPU.

- Every pair of tensorParallel sizes of each built-in model (1 to 8, a node's GPUs; Qwen3-0.6B also
  16, where the ranks outnumber its 8 KV heads) and of a model of 10 KV heads and 40 attention heads
  (1 to 10), whose sizes 2 and 5 divide neither each other: the config's verdict (infra.load, every
  cross-key check) against vLLM's (each worker's engine config and KV heads' rule, then the decode
  ranks' handshake with the prefill worker), both ways. The one difference allowed is the project's
  own stricter rule: a size above the model's KV heads, whose replicated heads the sizing does not
  model, is refused where vLLM would run it.
- Every pair both take: the prefill ranks each decode rank reads, how many bytes of each block and
  from where in it, as vLLM's descriptors say, against infra/kv_ranks.py's reads.
- Mixed layouts the project renders (the two-node-rdma example's Qwen3-32B): each worker's own
  rendered command, paired, against the sizing's reads.

Each worker's command is the project's own render of the model at tensorParallel 1 with the
`--tensor-parallel-size N` the project writes for N (infra/manifests/graph.py), so that sizes the
config refuses reach vLLM too.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from infra import kv_ranks
from infra.catalogue import BUILTIN_MODELS
from infra.errors import ConfigError
from infra.load import load
from tests.engine import model
from tests.engine.test_engine import CHECKER_TIMEOUT_S, engine_python, render, with_flag
from tests.helpers import loaded, raw_config

pytestmark = pytest.mark.engine

CHECKER = Path(__file__).with_name("check_kv_pairs.py")
STACK = "cross-server"
# One node of whole GPUs, more than any size checked needs, and memory no size runs out of: only the
# heads' rule and the pair's are judged here (gpusPerNode, the sizing: tests/infra/test_topology.py).
CLASS = {"memory": "2048Gi", "nodes": 1, "gpusPerNode": 16, "sharing": "whole",
         "nodeSelector": [{"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["70000"]}],
         "effectiveTflops": 400, "memoryBandwidth": "3350G", "peakTflops": 989}
# Phi-3-medium's counts (40 attention heads, 10 KV heads), in a stack file's model keys.
TEN = {"name": "example/ten-kv-heads", "layers": 40, "kvHeads": 10, "headDim": 128, "attentionHeads": 40,
       "hiddenSize": 5120, "parameters": 14_000_000_000}


@dataclass(frozen=True)
class Model:
    stack: dict[str, Any]  # the stack file's `model`
    config: dict[str, Any]  # the config.json vLLM reads
    sizes: tuple[int, ...]  # the tensorParallel sizes paired

    @property
    def kv_heads(self) -> int:
        return self.config["num_key_value_heads"]


def _models() -> dict[str, Model]:
    out = {}
    for name, g in BUILTIN_MODELS.items():
        sizes = (*range(1, 9), 16) if name == model.NAME else tuple(range(1, 9))
        out[name] = Model({"name": name}, model.shaped(g["layers"], g["kvHeads"], g["headDim"], g["attentionHeads"],
                                                       g["hiddenSize"]), sizes)
    out[TEN["name"]] = Model(TEN, model.shaped(TEN["layers"], TEN["kvHeads"], TEN["headDim"], TEN["attentionHeads"],
                                               TEN["hiddenSize"]), tuple(range(1, 11)))
    return out


MODELS = _models()


def _stack(m: Model, prefill_tp: int, decode_tp: int) -> Callable[[dict[str, Any]], None]:
    def edit(c: dict[str, Any]) -> None:
        c["gpuClasses"] = {"big": dict(CLASS)}
        c["model"] = dict(m.stack)
        c["modelCache"] = {"mode": "off"}
        c["workers"] = [{"name": role, "role": role, "replicas": 1, "gpuClass": "big", "tensorParallel": tp,
                         "kvCacheBytes": "4Gi"} for role, tp in (("prefill", prefill_tp), ("decode", decode_tp))]
    return edit


def config_verdict(m: Model, prefill_tp: int, decode_tp: int) -> list[tuple[str, str]]:
    """The config's problems with the pair (empty: it takes it), as infra.load finds them."""
    try:
        load(raw_config(STACK, _stack(m, prefill_tp, decode_tp)), STACK)
    except ConfigError as exc:
        return exc.problems
    return []


# Mixed layouts of the example beyond the lab (Qwen3-32B on two 8-GPU nodes), as (prefill TP,
# replicas, decode TP, replicas): several TP1 prefill workers into one TP4 decode worker, and others,
# each a count the sizing places (its groups spread even: a TP 8 decode pod beside one TP 2 prefill
# pod, as two would take GPUs of both nodes).
EXAMPLE = "two-node-rdma"
MIXED = [(1, 4, 4, 1), (2, 2, 4, 1), (4, 1, 2, 2), (2, 1, 8, 1)]


def _example(prefill_tp: int, prefill_n: int, decode_tp: int, decode_n: int) -> Callable[[dict[str, Any]], None]:
    def edit(c: dict[str, Any]) -> None:
        for w, tp, n in zip(c["workers"], (prefill_tp, decode_tp), (prefill_n, decode_n), strict=True):
            w.update(tensorParallel=tp, replicas=n)
    return edit


@dataclass
class PairRun:
    versions: dict[str, str]
    workers: dict[str, dict[str, Any]]
    pairs: dict[str, dict[str, Any]]
    verdicts: dict[str, list[tuple[str, str]]]  # grid pair id -> the config's problems


def _grid_id(name: str, p: int, d: int) -> str:
    return f"{name}/prefill-{p}/decode-{d}"


def _grid(name: str) -> list[tuple[int, int, str]]:
    """Every (prefill size, decode size, pair id) of a model."""
    sizes = MODELS[name].sizes
    return [(p, d, _grid_id(name, p, d)) for p in sizes for d in sizes]


@pytest.fixture(scope="module")
def pairs(tmp_path_factory, engine_summary) -> PairRun:
    python = engine_python()
    work = tmp_path_factory.mktemp("kv-pairs")
    workers, request_pairs, verdicts = {}, [], {}
    for i, (name, m) in enumerate(MODELS.items()):
        directory = model.write(work / f"model-{i}", name, m.config)
        argvs = render(STACK, _stack(m, 1, 1), directory, name)
        for t in m.sizes:
            for role in ("prefill", "decode"):
                argv = argvs[role]
                workers[f"{name}/{role}-{t}"] = argv if t == 1 else with_flag(argv, "--tensor-parallel-size", str(t))
        for p, d, key in _grid(name):
            request_pairs.append({"id": key, "prefill": f"{name}/prefill-{p}", "decode": f"{name}/decode-{d}"})
            verdicts[key] = config_verdict(m, p, d)
    example_dir = model.write(work / "example", model.EXAMPLE_NAME)
    for case in MIXED:
        argvs = render(EXAMPLE, _example(*case), example_dir, model.EXAMPLE_NAME)
        key = f"{EXAMPLE}/mixed-{'-'.join(map(str, case))}"
        workers.update({f"{key}/{role}": argv for role, argv in argvs.items()})
        request_pairs.append({"id": key, "prefill": f"{key}/prefill", "decode": f"{key}/decode"})
    request, report = work / "request.json", work / "report.json"
    request.write_text(json.dumps({"workers": [{"id": k, "argv": v} for k, v in workers.items()],
                                   "pairs": request_pairs}))
    proc = subprocess.run([python, str(CHECKER), str(request), str(report)], cwd=work, capture_output=True, text=True,
                          timeout=CHECKER_TIMEOUT_S)
    assert proc.returncode == 0 and report.is_file(), f"check_kv_pairs.py failed:\n{proc.stdout}\n{proc.stderr}"
    got = json.loads(report.read_text())
    run = PairRun(got["versions"], got["workers"], got["pairs"], verdicts)
    both = sum(1 for k, v in verdicts.items() if not v and run.pairs[k]["ok"])
    refused = sum(1 for k, v in verdicts.items() if v and not run.pairs[k]["ok"])
    stricter = sum(1 for k, v in verdicts.items() if v and run.pairs[k]["ok"])
    engine_summary.append(f"kv pairs: {len(verdicts)} (prefill, decode) tensorParallel pairs of {len(MODELS)} models: "
                          f"{both} taken by vLLM and the config, {refused} refused by both, {stricter} refused by "
                          "the config alone (a size above the model's KV heads)")
    engine_summary.extend(f"{k}: {_describe(r)}" for k, r in run.pairs.items() if k.startswith(EXAMPLE))
    return run


def _describe(r: dict[str, Any]) -> str:
    if not r["ok"]:
        return f"REFUSED by {r['stage']}: {r['error']}"
    reads = ", ".join(f"d{x['decode_rank']}<-p{x['prefill_rank']} {x['bytes_per_block']:,} B/block"
                      for x in r["reads"])
    return f"tp_ratio {r['tp_ratio']}: {reads}"


def _head_bytes(config: dict[str, Any]) -> int:
    """One KV head's bytes of one layer's 16-token block (K and V, bfloat16)."""
    return 2 * model.BLOCK_TOKENS * config["head_dim"] * 2


def _expected(config: dict[str, Any], prefill_tp: int, decode_tp: int) -> list[dict[str, Any]]:
    """infra/kv_ranks.py's reads as vLLM's descriptors would give them."""
    head = _head_bytes(config)
    return [{"decode_rank": r.decode_rank, "prefill_rank": r.prefill_rank,
             "bytes_per_block": r.heads * head * config["num_hidden_layers"], "offset_bytes": [r.first_head * head]}
            for r in kv_ranks.reads(prefill_tp, decode_tp, config["num_key_value_heads"])]


def test_the_checker_ran_the_pinned_vllm(pairs):
    assert pairs.versions == {"ai-dynamo": "1.6.1", "vllm": "0.31.0"}


@pytest.mark.parametrize("name", list(MODELS))
def test_the_config_takes_exactly_the_pairs_vllm_takes_but_replicated_heads(pairs, name):
    m = MODELS[name]
    wrong = []
    for p, d, key in _grid(name):
        mine, theirs = pairs.verdicts[key], pairs.pairs[key]
        others = [(k, why) for k, why in mine if not k.endswith(".tensorParallel")]
        assert others == [], f"{key}: the config refused more than the sizes: {others}"
        if not mine and not theirs["ok"]:
            wrong.append(f"{key}: the config takes it, vLLM refuses it: {theirs['stage']}: {theirs['error']}")
        elif mine and theirs["ok"] and max(p, d) <= m.kv_heads:
            wrong.append(f"{key}: vLLM takes it, the config refuses it: {mine}")
    assert wrong == [], "\n".join(wrong)


@pytest.mark.parametrize("name", list(MODELS))
def test_a_pair_refused_for_its_sizes_says_what_vllm_says(pairs, name):
    """Where vLLM takes each worker on its own and refuses the pair, the config's refusal is the decode
    group's tensorParallel, in vLLM's own words."""
    m = MODELS[name]
    wrong, seen = [], 0
    for p, d, key in _grid(name):
        theirs = pairs.pairs[key]
        if theirs["ok"] or theirs["stage"] == "a worker on its own" or max(p, d) > m.kv_heads:
            continue  # taken; or a size refused on its own; or the project's stricter rule (above)
        seen += 1
        said = theirs["error"].removeprefix("AssertionError: ")
        mine = [why for k, why in pairs.verdicts[key] if k == "workers.decode.tensorParallel"]
        if len(mine) != 1 or f"\"{said}\"" not in mine[0]:
            wrong.append(f"{key}: vLLM said {said!r} ({theirs['stage']}); the config said {mine}")
    assert wrong == [], "\n".join(wrong)
    # Of the models checked, only the one of 10 KV heads has such pairs: 2 and 5, 5 and 2, 2 and 5 x 2 ...
    assert (seen > 0) == (m.kv_heads == 10)


@pytest.mark.parametrize("name", list(MODELS))
def test_each_decode_rank_reads_what_the_project_says_where_vllm_says(pairs, name):
    m = MODELS[name]
    wrong = []
    for p, d, key in _grid(name):
        if pairs.verdicts[key]:
            continue
        got = pairs.pairs[key]["reads"]
        if got != _expected(m.config, p, d):
            wrong.append(f"{key}: vLLM reads {got}, the project {_expected(m.config, p, d)}")
    assert wrong == [], "\n".join(wrong[:5])


@pytest.mark.parametrize("case", MIXED, ids=["-".join(map(str, c)) for c in MIXED])
def test_the_rendered_mixed_layouts_pair_as_the_project_sizes_them(pairs, case):
    key = f"{EXAMPLE}/mixed-{'-'.join(map(str, case))}"
    r = pairs.pairs[key]
    assert r["ok"], _describe(r)
    for role, tp in (("prefill", case[0]), ("decode", case[2])):
        assert pairs.workers[f"{key}/{role}"]["tp"] == tp
        assert pairs.workers[f"{key}/{role}"]["layout"] == "LBHNC"  # heads contiguous: a rank's share splits
    # The sizing's reads of the same stack (rank_reads: the heads each decode rank takes of each prefill
    # rank), as vLLM's descriptors give them.
    (t,) = loaded(EXAMPLE, _example(*case)).sizing.transfers
    c, head = model.EXAMPLE_CONFIG, _head_bytes(model.EXAMPLE_CONFIG)
    sized = [{"decode_rank": x.decode_rank, "prefill_rank": x.prefill_rank,
              "bytes_per_block": x.heads * head * c["num_hidden_layers"], "offset_bytes": [x.first_head * head]}
             for x in t.rank_reads]
    assert r["reads"] == sized

"""How vLLM 0.31.0's NixlConnector pairs the ranks of a prefill worker and a decode worker of
different tensorParallel: whether it takes the pair, and which prefill ranks each decode rank reads
which KV heads from. The rule the config's pair check (infra/validate/topology.py) reads; the
engine tier holds it to vLLM's own code for every pair of sizes (tests/engine/test_kv_pairs.py).

What vLLM 0.31.0 does, read in its wheel (vllm/distributed/kv_transfer/kv_connector/):
- utils.py, `TransferTopology.tp_ratio`: the decode worker (local) and the prefill worker (remote)
  pair when the larger tensor parallel size divides by the smaller, and asserts otherwise ("Local
  tensor parallel size D is not divisible by remote tensor parallel size P", or the other way round).
  The decode side asks at its first handshake with a prefill worker (`handshake_target_ranks`), so
  the workers start and report Ready, and each request sent over the pair fails
  (KVTransferConfig.kv_load_failure_policy: "fail", the default).
- v1/nixl/tp_mapping.py, `compute_tp_mapping`: decode TP D >= prefill TP P: decode rank r reads
  from prefill rank r x P // D alone, its own share of that rank's heads (`rank_offset_factor`
  picks which); D < P: rank r reads from the P / D prefill ranks r x P/D .. (r + 1) x P/D - 1, each
  its whole block. (Its GQA dedup, one rank per KV head where P exceeds the KV heads, serves only
  pairs the handshake refuses for models like ours: below.)
- v1/nixl/base_worker.py, `_build_fa_remote`: each read moves the decode rank's block length over
  the number of ranks it reads from, per layer and block; `_validate_remote_agent_handshake`:
  refuses (asserts) D < P where the prefill's KV heads are replicated (P above the KV heads), and
  requires head-contiguous blocks for a split, which NixlConnector.get_required_kvcache_layout
  gives every non-MLA model (LBHNC); equal block sizes both sides (`block_size_ratio`: dynamo-lab
  writes --block-size 16 to every worker).
- A rank holds max(1, KV heads // TP) heads (vllm/config/model.py, ModelConfig.get_num_kv_heads).

MLA and Mamba models, decode context parallelism and NixlPushConnector take other branches of that
code; dynamo-lab models none of them (its models are dense GQA, its connector NixlConnector).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class RankRead:
    """One decode rank's read from one prefill rank: `heads` of the model's KV heads, from the
    prefill rank's `first_head` (of its own, from 0) on, of every layer of every block it pulls."""

    decode_rank: int
    prefill_rank: int
    heads: int
    first_head: int = 0


def heads_per_rank(tp: int, kv_heads: int) -> int:
    """The KV heads one rank of a `tp`-rank worker holds (ModelConfig.get_num_kv_heads): its share,
    or one replicated head where the ranks outnumber the heads."""
    return max(1, kv_heads // tp)


def refusal(prefill_tp: int, decode_tp: int, kv_heads: int) -> Optional[str]:
    """Why NixlConnector refuses a prefill worker of `prefill_tp` ranks feeding a decode worker of
    `decode_tp` (this module's docstring, with vLLM's file and words), or None where it takes them."""
    if decode_tp >= prefill_tp and decode_tp % prefill_tp:
        said = f"Local tensor parallel size {decode_tp} is not divisible by remote tensor parallel size {prefill_tp}"
    elif decode_tp < prefill_tp and prefill_tp % decode_tp:
        said = f"Remote tensor parallel size {prefill_tp} is not divisible by local tensor parallel size {decode_tp}"
    else:
        said = None
    if said is not None:
        return (f"neither divides the other, and NixlConnector maps a decode rank onto whole prefill ranks or "
                f"whole shares of one (vLLM 0.31.0 kv_connector/utils.py, TransferTopology.tp_ratio asserts: "
                f"\"{said}.\")")
    if prefill_tp > decode_tp and prefill_tp > kv_heads:
        return (f"{prefill_tp} prefill ranks replicate the model's {kv_heads} KV heads, and NixlConnector does not "
                f"read replicated heads into fewer decode ranks (vLLM 0.31.0 kv_connector/v1/nixl/base_worker.py, "
                f"_validate_remote_agent_handshake asserts: not (tp_ratio < 0 and is_kv_replicated))")
    return None


def sources(decode_rank: int, prefill_tp: int, decode_tp: int, kv_heads: int) -> tuple[int, ...]:
    """The prefill ranks decode rank `decode_rank` reads from (tp_mapping.py, compute_tp_mapping's
    attention ranks), for a pair `refusal` takes (so no replicated prefill heads to dedup)."""
    if decode_tp >= prefill_tp:
        return (decode_rank * prefill_tp // decode_tp,)
    ratio = prefill_tp // decode_tp
    return tuple(range(decode_rank * ratio, (decode_rank + 1) * ratio))


def reads(prefill_tp: int, decode_tp: int, kv_heads: int) -> tuple[RankRead, ...]:
    """Every read one request's KV takes from a prefill worker to a decode worker, by decode rank
    then prefill rank: each decode rank's heads over the ranks it reads from (_build_fa_remote)."""
    if (why := refusal(prefill_tp, decode_tp, kv_heads)) is not None:
        raise ValueError(f"prefill tensorParallel {prefill_tp}, decode {decode_tp}: {why}")
    out = []
    mine = heads_per_rank(decode_tp, kv_heads)
    for r in range(decode_tp):
        ranks = sources(r, prefill_tp, decode_tp, kv_heads)
        if len(ranks) == 1:
            # Its share of one prefill rank's heads: vLLM's rank_offset_factor (tp_mapping.py) in heads,
            # where the decode rank's first head is r x K // D and the prefill rank's p x K // P.
            (p,) = ranks
            out.append(RankRead(r, p, mine, r * kv_heads // decode_tp - p * kv_heads // prefill_tp))
        else:
            out += [RankRead(r, p, mine // len(ranks)) for p in ranks]
    return tuple(out)

"""The sizing report in words (`dynamo-lab sizing STACK`): tables and verdicts from StackSizing data."""

from __future__ import annotations

from infra.sizing import ModelCacheSizing, StackSizing, ThroughputBasis, TransferSizing
from infra.units import human, human_si


def text_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def verdict(t: TransferSizing, stack: str) -> str:
    """Both sides of separation's ledger for one average request, and where the verdict is made.
    The sizing does not judge whether separation pays: the transfer's cost falls on the first token,
    the prefill it moves off the decode GPU on every running request's next tokens, and which weighs
    more under load (queues, the link shared, the objectives) is advise's one verdict (issue 45:
    a per-request ledger once said "it can pay" where the ranking put separation 4x worse)."""
    seconds, saved, ratio = t.expected_seconds, t.prefill_seconds_estimate, t.transfer_over_prefill
    case = (f"expected case: {t.decode_prefix_hit_probability:.0%} of requests find their prefix in the decode "
            f"worker's cache and move {human_si(t.warm_bytes)}, the rest {human_si(t.cold_bytes)}")
    cap = "" if t.link_max_requests_per_s is None else (
        f"; the shared link carries at most {t.link_max_requests_per_s:.2f} requests/s, so at higher "
        "load requests queue for it")
    return (f"the cost: {seconds:.2f} s of KV transfer per request on this {t.path} path before its first token "
            f"({case}), {ratio:.1f}x the ~{saved:.2f} s (estimate) of prefill it takes off the decode GPU; the gain: "
            f"that prefill no longer stalls the decode steps of the requests running beside it (their inter-token "
            f"latency){cap}. Whether it pays under load, on TTFT p99, ITL p99 and goodput under objectives, is "
            f"`dynamo-lab advise {stack}`'s verdict (its \"Does separating prefill and decode pay?\" line; "
            "docs/advise.md)")


def model_cache(c: ModelCacheSizing) -> list[str]:
    """Where the model's files are kept, the disk each cache takes, and how often the Hub is read."""
    disk = f"{human_si(c.bytes_per_cache)} ({human(c.bytes_per_cache)})"
    if c.mode == "off":
        head = (f"Model cache: off; each of the {c.downloads} worker pods downloads {disk} from the Hugging "
                "Face Hub when it starts")
    elif c.mode in ("nodeVolume", "hostPath"):
        many = f"; {c.downloads} nodes" if c.downloads > len(c.locations) else ""
        head = (f"Model cache: {c.mode}, a directory on each GPU node with workers ({', '.join(c.locations)}{many}): "
                f"{disk} of disk per node, fetched from the Hub once per node")
    else:
        size = f", {human(c.claim_bytes)}" if c.claim_bytes is not None else ""
        head = f"Model cache: claim {c.locations[0]}{size}: {disk} of it used, fetched from the Hub once"
    dtype = c.weights_bytes // c.stored_parameters
    return [head, f"  {c.bytes_per_cache:,} B = {c.weights_bytes:,} B weights ({c.stored_parameters:,} stored "
                  f"parameters x {dtype} B) + {c.tokenizer_bytes:,} B config and tokenizer files (estimate)"]


def gpus(r: StackSizing) -> list[str]:
    """The GPU fit per class: the lab's one shared GPU a class, or, beyond it, each class's nodes and
    GPUs and the most workers that may share one GPU (the sizing plans each GPU for that many)."""
    if all(g.nodes == 1 and g.gpus_per_node == 1 and g.gpus_needed is None for g in r.gpus):
        return ["GPUs (one per class; weights + KV pool + overhead per worker; overhead is an estimate):",
                text_table(["gpu class", "workers", "memory", "budget", "planned"],
                           [[g.gpu_class, str(g.workers), human(g.memory_bytes), human(g.budget_bytes),
                             human(g.planned_bytes)] for g in r.gpus])]
    return ["GPUs (per GPU: the most workers that may share one at once, their weights + KV pool + overhead; "
            "overhead is an estimate):",
            text_table(["gpu class", "nodes x GPUs", "workers", "GPUs they take", "sharing one GPU", "memory",
                        "budget", "planned"],
                       [[g.gpu_class, f"{g.nodes} x {g.gpus_per_node}", str(g.workers),
                         "time-sliced" if g.gpus_needed is None else str(g.gpus_needed), str(g.sharing),
                         human(g.memory_bytes), human(g.budget_bytes), human(g.planned_bytes)] for g in r.gpus])]


def rank_reads(r: StackSizing) -> list[str]:
    """Where a pair runs tensorParallel above 1: which prefill ranks each decode rank reads which KV
    heads from, and how many bytes of one request (none where every pair is one rank to one)."""
    if all(len(t.rank_reads) == 1 for t in r.transfers):
        return []
    rows = [[t.from_group, t.to_group, str(x.decode_rank), str(x.prefill_rank),
             str(x.first_head) if x.heads == 1 else f"{x.first_head}-{x.first_head + x.heads - 1}",
             f"{human_si(x.cold_bytes)} / {human_si(x.warm_bytes)}"]
            for t in r.transfers for x in t.rank_reads]
    return ["Rank reads (vLLM 0.31.0's NixlConnector: each decode rank pulls its own KV heads from the prefill "
            "ranks holding them, all reads of a request side by side):",
            text_table(["from", "to", "decode rank", "prefill rank", "KV heads (of the prefill rank's)",
                               "bytes cold / warm"], rows), ""]


def table(r: StackSizing) -> str:
    parallel = any(g.tensor_parallel > 1 for g in r.groups)
    out = [
        f"Stack {r.stack}: {r.model}, {r.input_tokens:,} input tokens per request, sized for "
        f"concurrency {r.concurrency} and {r.prefix_types} prefix types",
        f"KV per token {r.kv_bytes_per_token:,} B; KV per request {r.kv_bytes_per_request:,} B "
        f"({human_si(r.kv_bytes_per_request)}, {human(r.kv_bytes_per_request)})",
        f"KV layout assumed: --block-size {r.kv_layout.block_size_tokens}; {r.kv_layout.shape}: "
        f"{r.kv_layout.descriptor_bytes:,} B per descriptor, {r.kv_layout.block_bytes:,} B per block across "
        f"{r.kv_layout.layers} layers, {r.kv_layout.descriptors_per_request:,} descriptors per cold request",
        "",
        "Worker groups (per worker; 'memory limit' is what the pod gets):" if not parallel else
        "Worker groups (per worker; GPU plan and KV pool per GPU, each rank's; host memory per pod, all ranks; "
        "'memory limit' is what the pod gets):",
        text_table(
            ["group", "role", "x", *(["GPUs each"] if parallel else []), "gpu class", "KV pool",
             "max-model-len (blocks / pool)", "GPU plan",
             "gpu-mem-util", "CPU KV mirror", "host floor", "memory limit", "steady state*"],
            [[g.name, g.role, str(g.replicas), *([str(g.tensor_parallel)] if parallel else []), g.gpu_class,
              f"{human(g.kv_cache_bytes)} ({g.kv_cache_source}, {g.requests_in_pool:.1f} req)",
              f"{g.max_model_len:,} ({g.blocks_for_max_len} / {g.pool_blocks})",
              human(g.gpu_bytes_per_worker), f"{g.gpu_memory_utilization:.2f}",
              "yes" if g.cpu_buffers else "no", human(g.host_memory_floor_bytes),
              f"{human(g.memory_limit_bytes)} ({g.memory_source})",
              human(g.steady_state_bytes) if g.cpu_buffers else "-"] for g in r.groups],
        ),
        "* steady state: concurrency x KV per request, the write-up's estimate of the mirror in use;",
        "  the host floor is the ceiling (vLLM base + the whole KV pool mirrored + headroom).",
        "  max-model-len: the context every worker is started with; vLLM starts only if its pool holds one",
        "  sequence that long (blocks, with the null block) and the sized requests must fit it.",
        "",
        *gpus(r),
    ]
    if r.model_cache is not None:
        out += ["", *model_cache(r.model_cache)]
    if r.transfers:
        out += [
            "",
            "KV transfers (one average request, prefill -> decode; cold: the decode worker holds none of the "
            "prompt, warm: it already holds the request's shared prefix):",
            text_table(["from", "to", "path", "bytes cold / warm", "decode hit", "throughput",
                        "seconds cold / warm / expected", "prefill moved (est.)", "link max req/s",
                        "throughput from"],
                       [[t.from_group, t.to_group, t.path,
                         f"{human_si(t.cold_bytes)} / {human_si(t.warm_bytes)}",
                         f"{t.decode_prefix_hit_probability:.0%}", f"{human_si(t.throughput_bytes_per_s)}/s",
                         f"{t.cold_seconds:.2f} / {t.warm_seconds:.2f} / {t.expected_seconds:.2f}",
                         f"{t.prefill_seconds_estimate:.3f}",
                         "-" if t.link_max_requests_per_s is None else f"{t.link_max_requests_per_s:.2f}",
                         t.throughput_source] for t in r.transfers]),
            "",
        ]
        out += rank_reads(r)
        if any(t.throughput_basis is ThroughputBasis.ESTIMATE for t in r.transfers):
            out += ["Same-node throughput: an ESTIMATE from a development machine (its spread: docs/measurements.md) "
                    "until sizing.measured holds the lab's own probe result (dynamo-lab probe, or the in-cluster "
                    "probe).", ""]
        out += [f"Ledger {t.from_group} -> {t.to_group}: {verdict(t, r.stack)}." for t in r.transfers]
    else:
        out += ["", "No KV transfers: aggregated workers keep their KV on their own GPU."]
    return "\n".join(out)

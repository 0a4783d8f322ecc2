"""Several flows at once: the initiator of `dynamo-lab probe local --flows N` (N > 1).

N flows are N requests' KV, each in its own blocks of one pool per side, moved by N NIXL transfers
started together between the same two endpoints, as a decode worker pulls N requests from one
prefill worker. The target is kv_probe.py's own, unchanged: started with N x one transfer's bytes
(whole blocks), it registers and serves the N transfers' blocks as one set; stamps and CRC-32
checks cover all of them, so every flow must have moved its own blocks for the check to pass.

One agent pair, N transfer requests. vLLM 0.31.0's NixlConnector holds one `nixl_agent` per worker,
prepares each side's descriptors once (`prep_xfer_dlist`) and makes one transfer per request from
them (`make_prepped_xfer` with that request's block indices, then `transfer`), and checks them
(`check_xfer_state`) between engine steps. So here: the N handles are made and posted back to back,
then all checked every POLL_SECONDS until each is DONE; a flow's time runs from the round's start to
its own completion, the round's from the start to the last. N agent pairs would be N workers, and N
processes on a 2-core machine would measure N UCX progress threads fighting for the cores.

LOCAL ONLY: not shipped in a ConfigMap (the in-cluster probe runs kv_probe.py alone). It imports
kv_probe.py, its sibling, for the plan, pools, agent and control protocol: stdlib + numpy + NIXL.

    python kv_probe_flows.py initiator --connect HOST:P --repeats K --flows N TRANSFER [--timeout S]
    TRANSFER: one flow's, as kv_probe.py takes it (--pattern blocks only)
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
import statistics
import sys
import time

# kv_probe.py is this file's sibling: found from this directory (sys.path[0] when run as a script;
# added when imported as a module), never through the project's package.
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
import kv_probe  # noqa: E402


def flow_indices(layers: int, blocks: int, flows: int) -> list[list[int]]:
    """Each flow's descriptor indices in the pool's list of flows x blocks blocks in every layer.

    kv_probe.Pool lists its chunks layer by layer (index = layer x all blocks + block); flow k owns
    blocks k x blocks .. (k + 1) x blocks - 1, in every layer, as a request owns its blocks.
    """
    total = flows * blocks
    return [[layer * total + b for layer in range(layers) for b in range(k * blocks, (k + 1) * blocks)]
            for k in range(flows)]


def summary(flow_bytes: int, rounds: list[list[float]]) -> dict:
    """Per-flow and aggregate figures from the timed rounds' per-flow seconds (each from the round's start)."""
    flows = len(rounds[0])
    every = [s for r in rounds for s in r]
    each = sorted(flow_bytes / s for s in every)
    per_index = [statistics.median(r[k] for r in rounds) for k in range(flows)]
    return {
        "flow_seconds_median": statistics.median(every), "flow_seconds_min": min(every),
        "flow_seconds_max": max(every), "flow_seconds_median_by_flow": per_index,
        "flow_throughput_bytes_per_s": statistics.median(each),
        "flow_throughput_bytes_per_s_min": each[0], "flow_throughput_bytes_per_s_max": each[-1],
    }


def _round(agent, op: str, local, remote, indices, deadline: float, round_: int) -> list[float]:
    """Start every flow's transfer, then check them all until each is done: each flow's seconds."""
    import numpy as np

    start = time.perf_counter()
    handles, states, done = [], [], [None] * len(indices)
    for k, idx in enumerate(indices):
        ids = np.asarray(idx, dtype=np.int32)
        handles.append(agent.make_prepped_xfer(op, local, ids, remote, ids, f"probe-{k}".encode()))
        states.append(agent.transfer(handles[-1]))
    while True:
        now = time.perf_counter()
        for k, state in enumerate(states):
            if state == "DONE" and done[k] is None:
                done[k] = now - start
            elif state not in ("DONE", "PROC"):
                raise RuntimeError(f"NIXL {op} {round_}, flow {k} failed: state {state}")
        if all(d is not None for d in done):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"transfer {round_}: flows {[k for k, d in enumerate(done) if d is None]} "
                               "did not finish in time")
        time.sleep(kv_probe.POLL_SECONDS)
        states = [s if s == "DONE" else agent.check_xfer_state(h) for s, h in zip(states, handles, strict=True)]
    for h in handles:
        agent.release_xfer_handle(h)
    return done


def initiator(host: str, port: int, op: str, p: dict, layers: int, flows: int, repeats: int,
              timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    total = kv_probe.plan(flows * p["bytes"], "blocks", layers, p["descriptor_bytes"], p["pool_blocks"])
    pool = kv_probe.Pool(total, layers, key=2)
    source = kv_probe._is_source("initiator", op)
    if source:
        pool.fill()
    module, agent = kv_probe._agent("probe-initiator", pool)
    indices = flow_indices(layers, p["blocks"], flows)
    sock = kv_probe._connect(host, port, deadline)
    sock.settimeout(timeout)
    with sock, sock.makefile("rwb") as f:
        hello = kv_probe._recv(f)
        if (hello["op"], hello["descriptors"], hello["descriptor_bytes"]) != (op, len(pool.addrs), pool.size):
            raise RuntimeError(f"the target moves {hello['descriptors']} x {hello['descriptor_bytes']} B by "
                               f"{hello['op']}, this side {len(pool.addrs)} x {pool.size} B by {op} "
                               f"({flows} flows)")
        remote_agent = kv_probe._add_remote(agent, base64.b64decode(hello["metadata"]), deadline)
        local = agent.prep_xfer_dlist("NIXL_INIT_AGENT", pool.descriptor_list(), "DRAM")
        remote = agent.prep_xfer_dlist(remote_agent, pool.descriptor_list(hello["addrs"]), "DRAM")
        rounds, intact = [], True
        for round_ in range(repeats + 1):
            if source:
                pool.stamp(round_)
                expected = pool.crc()
            else:
                kv_probe._send(f, {"op": "stamp", "round": round_})
                kv_probe._send(f, {"op": "crc"})
                expected = kv_probe._recv(f)["crc"]
            rounds.append(_round(agent, op, local, remote, indices, deadline, round_))
            if source:
                kv_probe._send(f, {"op": "crc"})
                moved = kv_probe._recv(f)["crc"]
            else:
                moved = pool.crc()
            intact = intact and moved == expected
        kv_probe._send(f, {"op": "done"})
    timed = rounds[1:]  # rounds[0] is the warm-up (connection set-up, first touch), discarded
    seconds = [max(r) for r in timed]  # until the last flow is done
    median = statistics.median(seconds)
    return {
        "role": "initiator", "nixl_module": module, "op": op, "pattern": p["pattern"],
        "descriptors": p["descriptors"], "descriptor_bytes": p["descriptor_bytes"], "blocks": p["blocks"],
        "bytes": total["bytes"], "initiator_pool_bytes": p["pool_bytes"], "repeats": repeats,
        "warmup_seconds": max(rounds[0]), "seconds": seconds, "seconds_min": min(seconds),
        "seconds_median": median, "seconds_max": max(seconds),
        "throughput_bytes_per_s": total["bytes"] / median, "intact": intact,
        "ucx_tls": os.environ.get("UCX_TLS", "(UCX default)"),
        "ucx_rndv_thresh": os.environ.get("UCX_RNDV_THRESH", "(UCX default)"),
        "flows": flows, "flow_bytes": p["bytes"], "flow_seconds": timed, **summary(p["bytes"], timed),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("role", choices=["initiator"])  # as kv_probe.py's: the target is kv_probe.py's
    ap.add_argument("--connect", required=True, metavar="HOST:PORT")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--flows", type=int, required=True)
    ap.add_argument("--bytes", type=int, required=True, help="one flow's")
    ap.add_argument("--op", choices=kv_probe.OPS, default="READ")
    ap.add_argument("--pattern", choices=["blocks"], default="blocks")
    ap.add_argument("--layers", type=int, default=28)
    ap.add_argument("--block-bytes", type=int, default=64 * 1024)
    ap.add_argument("--pool-blocks", type=int, required=True, help="blocks per layer in this side's pool")
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args(argv)
    if args.flows < 2 or args.repeats < 1:
        ap.error("--flows must be at least 2 (one flow: kv_probe.py) and --repeats at least 1")
    try:
        one = kv_probe.plan(args.bytes, "blocks", args.layers, args.block_bytes, args.pool_blocks)
        kv_probe.plan(args.flows * one["bytes"], "blocks", args.layers, args.block_bytes, args.pool_blocks)
    except ValueError as exc:
        ap.error(f"{exc} ({args.flows} flows of {math.ceil(args.bytes / (args.layers * args.block_bytes))} "
                 "blocks each)")
    host, _, port = args.connect.rpartition(":")
    result = initiator(host, int(port), args.op, one, args.layers, args.flows, args.repeats, args.timeout)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""KV-transfer probe: NIXL over UCX between two endpoints, moving KV the way the workers do.

vLLM 0.31.0's NIXL connectors move a request's KV as one descriptor per layer per KV block, the
blocks scattered in each worker's pool, which holds one registered region per layer. With
NixlConnector (= NixlPullConnector) the decode side READs them from the prefill side; with
NixlPushConnector the prefill side WRITEs them (docs/sources.md). The probe does the same by default
(`--pattern blocks`): each side registers a host (DRAM) pool of `--layers` regions of
`--pool-blocks` blocks of `--block-bytes`, picks the request's blocks at random in it (source and
destination independently), and the initiator moves them with one NIXL transfer of
blocks x layers descriptors: a READ pulls (the initiator is the decode-like side), a WRITE pushes
(the initiator is the prefill-like side). `--pattern contiguous` moves the bytes as one descriptor
in a buffer of exactly that size instead, for comparison.

UCX reads its settings (UCX_TLS, UCX_RNDV_THRESH) from the environment, which the caller sets to
the workers' (the pod's env in the cluster, `dynamo-lab probe local` on a laptop). The first
transfer of a descriptor set pays the connection set-up and the first touch of its pages (0.5-3.8 s,
docs/measurements.md) and is discarded; then `repeats` timed transfers. Every round the source
blocks get new content (one byte per 64 KiB changes), and the CRC-32 of the moved blocks on both
sides, in descriptor order, must agree: stale or misplaced bytes fail.

STANDALONE on purpose: stdlib + numpy + NIXL only, no project imports, so the same file runs in
the cluster (shipped in a ConfigMap, with the Dynamo runtime image's `nixl` module) and on a
laptop (with the `nixl-cu12` wheel, installed `--no-deps` with numpy; no GPU, no torch).

    python kv_probe.py target    --bind ADDR --port P TRANSFER [--timeout S]
    python kv_probe.py initiator --connect HOST:P --repeats K TRANSFER [--timeout S]
    TRANSFER: --bytes N [--op READ|WRITE] [--pattern blocks|contiguous]
              [--layers L --block-bytes B --pool-blocks P]

Both sides take the same TRANSFER arguments, except --pool-blocks: each side's own pool. The
initiator prints one JSON line with the result; the target one line when it is done.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
import socket
import statistics
import sys
import time
import zlib

STAMP = 64 * 1024  # every round, one byte in each STAMP bytes of the source changes
# Between checks of a transfer's state. A worker checks once per engine step; spinning instead
# takes a core from UCX's progress thread, which on a 2-core machine cut a READ's throughput by a
# third (docs/measurements.md). Costs at most 1 ms per timed transfer.
POLL_SECONDS = 0.001
OPS = ("READ", "WRITE")
PATTERNS = ("blocks", "contiguous")


def plan(nbytes: int, pattern: str, layers: int, block_bytes: int, pool_blocks: int) -> dict:
    """What one side registers and moves, without NIXL: the probe's descriptor arithmetic.

    blocks: ceil(nbytes / (layers x block_bytes)) whole blocks (vLLM moves whole blocks), one
    descriptor per layer per block, in a pool of layers x pool_blocks x block_bytes.
    contiguous: one descriptor of exactly nbytes, in a buffer of nbytes.
    """
    if nbytes <= 0:
        raise ValueError("--bytes must be positive")
    if pattern == "contiguous":
        return {"pattern": pattern, "blocks": None, "descriptors": 1, "descriptor_bytes": nbytes,
                "bytes": nbytes, "pool_blocks": None, "pool_bytes": nbytes}
    if pattern != "blocks":
        raise ValueError(f"pattern {pattern!r}: use one of {', '.join(PATTERNS)}")
    if layers <= 0 or block_bytes <= 0:
        raise ValueError("--layers and --block-bytes must be positive")
    blocks = math.ceil(nbytes / (layers * block_bytes))
    if pool_blocks < blocks:
        raise ValueError(f"--pool-blocks {pool_blocks} cannot hold the {blocks} blocks of one transfer "
                         f"({nbytes:,} bytes = {blocks} blocks x {layers} layers x {block_bytes:,} bytes)")
    return {"pattern": pattern, "blocks": blocks, "descriptors": blocks * layers,
            "descriptor_bytes": block_bytes, "bytes": blocks * layers * block_bytes,
            "pool_blocks": pool_blocks, "pool_bytes": layers * pool_blocks * block_bytes}


class Pool:
    """One side's registered memory and the descriptors of the transfer inside it."""

    def __init__(self, p: dict, layers: int, key: int):
        import numpy as np

        rng = np.random.default_rng(key)  # each side its own random blocks
        size = p["descriptor_bytes"]
        if p["pattern"] == "contiguous":
            self.regions = [np.zeros(p["bytes"], dtype=np.uint8)]
            self.chunks = [self.regions[0]]
        else:
            # One region per layer, as vLLM registers each layer's KV; the request's blocks are
            # distinct random ids, in random order, the same ids in every layer (as in vLLM).
            self.regions = [np.zeros(p["pool_blocks"] * size, dtype=np.uint8) for _ in range(layers)]
            for r in self.regions:
                r.fill(0)  # resident, like the workers' pinned KV mirror (and not touched mid-transfer)
            ids = rng.choice(p["pool_blocks"], p["blocks"], replace=False)
            self.chunks = [r[b * size:(b + 1) * size] for r in self.regions for b in ids]
        self.addrs = [int(c.ctypes.data) for c in self.chunks]
        self.size = size
        self._rng = rng

    def fill(self) -> None:
        """Random content (the source side)."""
        for c in self.chunks:
            c[:] = self._rng.integers(0, 256, c.nbytes, dtype=c.dtype)

    def stamp(self, round_: int) -> None:
        """New content every round, so bytes left from an earlier round cannot pass the check."""
        for i, c in enumerate(self.chunks):
            c[::STAMP] = (round_ * 7 + i) % 256

    def crc(self) -> int:
        value = 0
        for c in self.chunks:
            value = zlib.crc32(c, value)
        return value

    def region_list(self):
        import numpy as np

        return np.array([[r.ctypes.data, r.nbytes, 0] for r in self.regions], dtype=np.uint64)

    def descriptor_list(self, addrs=None):
        import numpy as np

        return np.array([[a, self.size, 0] for a in (addrs or self.addrs)], dtype=np.uint64)


def _nixl():
    """The NIXL API: the Dynamo runtime image's `nixl` package, else the `nixl-cu12` wheel."""
    try:
        from nixl._api import nixl_agent, nixl_agent_config  # type: ignore[import-not-found]
        return "nixl", nixl_agent, nixl_agent_config
    except ImportError:
        pass
    try:
        from nixl_cu12._api import nixl_agent, nixl_agent_config  # type: ignore[import-not-found]
        return "nixl_cu12", nixl_agent, nixl_agent_config
    except ImportError:
        sys.exit("probe: NIXL is not installed. Install it with: "
                 "python3 dev.py probe ... installs it (or run it in the Dynamo runtime image)")


def _agent(name: str, pool: Pool):
    module, nixl_agent, nixl_agent_config = _nixl()
    agent = nixl_agent(name, nixl_agent_config(backends=["UCX"]))
    agent.register_memory(pool.region_list(), "DRAM")
    return module, agent


def _send(f, obj: dict) -> None:
    f.write((json.dumps(obj) + "\n").encode())
    f.flush()


def _recv(f) -> dict:
    line = f.readline()
    if not line:
        raise ConnectionError("probe peer closed the control connection")
    return json.loads(line)


def _is_source(role: str, op: str) -> bool:
    """The side holding the KV (prefill-like): the target of a READ, the initiator of a WRITE."""
    return (role == "target") == (op == "READ")


def target(bind: str, port: int, op: str, p: dict, layers: int, timeout: float) -> dict:
    pool = Pool(p, layers, key=1)
    if _is_source("target", op):
        pool.fill()
    _, agent = _agent("probe-target", pool)
    with socket.create_server((bind, port)) as server:
        server.settimeout(timeout)
        conn, _ = server.accept()
    conn.settimeout(timeout)
    checks = 0
    with conn, conn.makefile("rwb") as f:
        _send(f, {"metadata": base64.b64encode(agent.get_agent_metadata()).decode(), "op": op,
                  "descriptors": len(pool.addrs), "descriptor_bytes": pool.size, "addrs": pool.addrs})
        while True:
            msg = _recv(f)
            if msg["op"] == "stamp":
                pool.stamp(msg["round"])
            elif msg["op"] == "crc":
                checks += 1
                _send(f, {"crc": pool.crc()})
            elif msg["op"] == "done":
                break
    return {"role": "target", "op": op, "bytes": p["bytes"], "pool_bytes": p["pool_bytes"], "checks": checks}


def _connect(host: str, port: int, deadline: float) -> socket.socket:
    while True:  # the target may still be starting
        try:
            return socket.create_connection((host, port), timeout=5)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _add_remote(agent, metadata: bytes, deadline: float) -> str:
    # Loading the metadata makes UCX connect to the target; retry briefly while a fresh network
    # (a pod or namespace just started) settles.
    while True:
        try:
            return agent.add_remote_agent(metadata)
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _transfer(agent, op: str, local, remote, count: int, deadline: float, round_: int) -> float:
    """One transfer as vLLM's workers make it: a request over prepared descriptor lists, by index."""
    import numpy as np

    indices = np.arange(count, dtype=np.int32)
    start = time.perf_counter()
    handle = agent.make_prepped_xfer(op, local, indices, remote, indices, b"probe")
    state = agent.transfer(handle)
    while state == "PROC":
        if time.monotonic() > deadline:
            raise TimeoutError(f"transfer {round_} did not finish in time")
        time.sleep(POLL_SECONDS)
        state = agent.check_xfer_state(handle)
    elapsed = time.perf_counter() - start
    agent.release_xfer_handle(handle)
    if state != "DONE":
        raise RuntimeError(f"NIXL {op} {round_} failed: state {state}")
    return elapsed


def initiator(host: str, port: int, op: str, p: dict, layers: int, repeats: int, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    pool = Pool(p, layers, key=2)
    source = _is_source("initiator", op)
    if source:
        pool.fill()
    module, agent = _agent("probe-initiator", pool)
    sock = _connect(host, port, deadline)
    sock.settimeout(timeout)
    with sock, sock.makefile("rwb") as f:
        hello = _recv(f)
        if (hello["op"], hello["descriptors"], hello["descriptor_bytes"]) != (op, len(pool.addrs), pool.size):
            raise RuntimeError(f"the target moves {hello['descriptors']} x {hello['descriptor_bytes']} B by "
                               f"{hello['op']}, this side {len(pool.addrs)} x {pool.size} B by {op}")
        remote_agent = _add_remote(agent, base64.b64decode(hello["metadata"]), deadline)
        local = agent.prep_xfer_dlist("NIXL_INIT_AGENT", pool.descriptor_list(), "DRAM")
        remote = agent.prep_xfer_dlist(remote_agent, pool.descriptor_list(hello["addrs"]), "DRAM")
        seconds, intact = [], True
        for round_ in range(repeats + 1):
            if source:
                pool.stamp(round_)
                expected = pool.crc()
            else:
                _send(f, {"op": "stamp", "round": round_})
                _send(f, {"op": "crc"})
                expected = _recv(f)["crc"]
            seconds.append(_transfer(agent, op, local, remote, len(pool.addrs), deadline, round_))
            if source:
                _send(f, {"op": "crc"})
                moved = _recv(f)["crc"]
            else:
                moved = pool.crc()
            intact = intact and moved == expected
        _send(f, {"op": "done"})
    timed = seconds[1:]  # seconds[0] is the warm-up (connection set-up, first touch), discarded
    median = statistics.median(timed)
    return {
        "role": "initiator", "nixl_module": module, "op": op, "pattern": p["pattern"],
        "descriptors": p["descriptors"], "descriptor_bytes": p["descriptor_bytes"], "blocks": p["blocks"],
        "bytes": p["bytes"], "initiator_pool_bytes": p["pool_bytes"], "repeats": repeats,
        "warmup_seconds": seconds[0], "seconds": timed, "seconds_min": min(timed),
        "seconds_median": median, "seconds_max": max(timed),
        "throughput_bytes_per_s": p["bytes"] / median, "intact": intact,
        "ucx_tls": os.environ.get("UCX_TLS", "(UCX default)"),
        "ucx_rndv_thresh": os.environ.get("UCX_RNDV_THRESH", "(UCX default)"),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="role", required=True)
    t = sub.add_parser("target")
    t.add_argument("--bind", default="0.0.0.0")
    t.add_argument("--port", type=int, required=True)
    i = sub.add_parser("initiator")
    i.add_argument("--connect", required=True, metavar="HOST:PORT")
    i.add_argument("--repeats", type=int, default=5)
    for sp in (t, i):
        sp.add_argument("--bytes", type=int, required=True)
        sp.add_argument("--op", choices=OPS, default="READ")
        sp.add_argument("--pattern", choices=PATTERNS, default="blocks")
        # Qwen3-0.6B: 28 layers; 2 (K, V) x 16 tokens x 8 KV heads x 128 x 2 bytes = 64 KiB a block.
        sp.add_argument("--layers", type=int, default=28)
        sp.add_argument("--block-bytes", type=int, default=64 * 1024)
        sp.add_argument("--pool-blocks", type=int, help="blocks per layer in this side's pool "
                        "(default: 4 x one transfer's)")
        sp.add_argument("--timeout", type=float, default=300)
    args = p.parse_args(argv)
    if args.pool_blocks is None and args.bytes > 0 and args.layers > 0 and args.block_bytes > 0:
        args.pool_blocks = 4 * math.ceil(args.bytes / (args.layers * args.block_bytes))
    try:
        transfer = plan(args.bytes, args.pattern, args.layers, args.block_bytes, args.pool_blocks or 0)
    except ValueError as exc:
        p.error(str(exc))
    if args.role == "target":
        result = target(args.bind, args.port, args.op, transfer, args.layers, args.timeout)
    else:
        if args.repeats < 1:
            p.error("--repeats must be at least 1")
        host, _, port = args.connect.rpartition(":")
        result = initiator(host, int(port), args.op, transfer, args.layers, args.repeats, args.timeout)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

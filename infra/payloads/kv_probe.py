"""KV-transfer probe: NIXL over UCX between two endpoints, with the workers' settings.

A target registers a host (DRAM) buffer; an initiator WRITEs one average request's KV bytes into it
with NIXL's UCX backend, as vLLM's NixlConnector does with kv_buffer_device=cpu. UCX reads its
settings (UCX_TLS, UCX_RNDV_THRESH) from the environment, which the caller sets to the workers'
(the pod's env in the cluster, `dynamo-lab probe local` on a laptop). The first transfer of a fresh
pair pays the connection warm-up (~1.5 s, docs/measurements.md) and is discarded; then `repeats`
timed transfers, each checked byte for byte (CRC-32 of the target's buffer against the source, with
the source changed every round so stale data fails).

STANDALONE on purpose: stdlib + numpy + NIXL only, no project imports, so the same file runs in
the cluster (shipped in a ConfigMap, with the Dynamo runtime image's `nixl` module) and on a
laptop (with the `nixl-cu12` wheel, installed `--no-deps` with numpy; no GPU, no torch).

    python probe.py target    --bind ADDR --port P --bytes N [--timeout S]
    python probe.py initiator --connect HOST:P --bytes N --repeats K [--timeout S]

The initiator prints one JSON line with the result; the target one line when it is done.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import socket
import statistics
import sys
import time
import zlib

CHUNK = 1 << 20  # the source is re-stamped every CHUNK bytes each round


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


def _agent(name: str, buf):
    import numpy as np

    module, nixl_agent, nixl_agent_config = _nixl()
    agent = nixl_agent(name, nixl_agent_config(backends=["UCX"]))
    region = np.array([[buf.ctypes.data, buf.nbytes, 0]], dtype=np.uint64)
    agent.register_memory(region, "DRAM")
    return module, agent, region


def _send(f, obj: dict) -> None:
    f.write((json.dumps(obj) + "\n").encode())
    f.flush()


def _recv(f) -> dict:
    line = f.readline()
    if not line:
        raise ConnectionError("probe peer closed the control connection")
    return json.loads(line)


def target(bind: str, port: int, nbytes: int, timeout: float) -> dict:
    import numpy as np

    buf = np.zeros(nbytes, dtype=np.uint8)
    _, agent, _ = _agent("probe-target", buf)
    with socket.create_server((bind, port)) as server:
        server.settimeout(timeout)
        conn, _ = server.accept()
    conn.settimeout(timeout)
    checks = 0
    with conn, conn.makefile("rwb") as f:
        _send(f, {"metadata": base64.b64encode(agent.get_agent_metadata()).decode(),
                  "addr": int(buf.ctypes.data), "bytes": nbytes})
        while True:
            msg = _recv(f)
            if msg["op"] == "crc":
                checks += 1
                _send(f, {"crc": zlib.crc32(buf)})
            elif msg["op"] == "done":
                break
    return {"role": "target", "bytes": nbytes, "checks": checks}


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


def initiator(host: str, port: int, nbytes: int, repeats: int, timeout: float) -> dict:
    import numpy as np

    deadline = time.monotonic() + timeout
    src = np.random.default_rng(2371).integers(0, 256, nbytes, dtype=np.uint8)
    module, agent, region = _agent("probe-initiator", src)
    sock = _connect(host, port, deadline)
    sock.settimeout(timeout)
    with sock, sock.makefile("rwb") as f:
        hello = _recv(f)
        remote = _add_remote(agent, base64.b64decode(hello["metadata"]), deadline)
        local_descs = agent.get_xfer_descs(region, "DRAM")
        remote_descs = agent.get_xfer_descs(np.array([[hello["addr"], nbytes, 0]], dtype=np.uint64), "DRAM")
        seconds, intact = [], True
        for round_ in range(repeats + 1):
            src[::CHUNK] = round_ % 256  # new content every round: stale bytes cannot pass
            handle = agent.initialize_xfer("WRITE", local_descs, remote_descs, remote, b"probe")
            start = time.perf_counter()
            state = agent.transfer(handle)
            while state == "PROC":
                if time.monotonic() > deadline:
                    raise TimeoutError(f"transfer {round_} did not finish within {timeout:.0f} s")
                state = agent.check_xfer_state(handle)
            elapsed = time.perf_counter() - start
            agent.release_xfer_handle(handle)
            if state != "DONE":
                raise RuntimeError(f"NIXL transfer {round_} failed: state {state}")
            _send(f, {"op": "crc"})
            intact = intact and _recv(f)["crc"] == zlib.crc32(src)
            seconds.append(elapsed)
        _send(f, {"op": "done"})
    timed = seconds[1:]  # seconds[0] is the warm-up (connection set-up), discarded
    median = statistics.median(timed)
    return {
        "role": "initiator", "nixl_module": module, "bytes": nbytes, "repeats": repeats,
        "warmup_seconds": seconds[0], "seconds": timed, "seconds_min": min(timed),
        "seconds_median": median, "seconds_max": max(timed),
        "throughput_bytes_per_s": nbytes / median, "intact": intact,
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
        sp.add_argument("--timeout", type=float, default=300)
    args = p.parse_args(argv)
    if args.bytes <= 0:
        p.error("--bytes must be positive")
    if args.role == "target":
        result = target(args.bind, args.port, args.bytes, args.timeout)
    else:
        if args.repeats < 1:
            p.error("--repeats must be at least 1")
        host, _, port = args.connect.rpartition(":")
        result = initiator(host, int(port), args.bytes, args.repeats, args.timeout)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

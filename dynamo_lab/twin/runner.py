"""A local twin of a stack: the real Dynamo frontend and KV router, with mocker workers, on loopback.

One `dynamo.mocker` process per worker replica with the stack's role, KV bytes per token and, for
disaggregated roles, the transfer throughput of its path from the sizing (a measured one when the
config has it). The KV pool is NOT passed as the mocker's block count: with the stacks' pinned
pools the twin's requests/s fell to about half the lab's (docs/benchmark.md), so the mocker
keeps its default capacity. File discovery, TCP request plane, ZMQ event plane, all on
this machine (docs/sources.md). Every process runs in its own process group and is
stopped on exit, on failure, on Ctrl-C and on SIGTERM.

The Dynamo runtime lives in its own environment (.venv-twin, the `twin` extra of the lock): its
dependencies are heavy; `twin_python()` finds it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from dynamo_lab.paths import ROOT
from dynamo_lab.procs import cleaned, free_port, sigterm_as_interrupt
from dynamo_lab.twin import model_dir as model_dir_script
from infra import prefix_cache
from infra.config.schema import StackConfig
from infra.errors import UserError
from infra.payloads.aiperf_sweep import model_listed
from infra.sizing import StackSizing

ROLE_MODE = {"agg": "agg", "prefill": "prefill", "decode": "decode"}


class TwinError(UserError):
    pass


def twin_python() -> Path:
    path = Path(os.environ.get("DYNAMO_LAB_TWIN_PYTHON", ROOT / ".venv-twin" / "bin" / "python"))
    if not path.exists():
        raise TwinError(f"no twin environment at {path}: run it through `python3 dev.py twin|bench ...`, "
                        "which installs the lock's twin extra into .venv-twin")
    return path


@dataclass(frozen=True)
class Mocker:
    group: str
    role: str
    index: int
    kv_bytes_per_token: int
    bandwidth_gb_s: Optional[float]  # decimal GB/s, the mocker's unit
    # A prefill mocker's handoff port: with it, the mocker charges a transfer only for the blocks the
    # decode mocker's own cache lacks (destination_missing), as vLLM's NixlPullConnector moves them.
    bootstrap_port: Optional[int] = None

    def args(self, model_dir: Path, model_name: str) -> list[str]:
        out = ["-m", "dynamo.mocker", "--model-path", str(model_dir), "--model-name", model_name,
               "--discovery-backend", "file", "--request-plane", "tcp", "--event-plane", "zmq",
               # Always explicit: the mocker's own formula takes head_dim = hidden/heads (wrong for Qwen3).
               "--kv-bytes-per-token", str(self.kv_bytes_per_token),
               # vLLM's block size: prefix reuse and transfers are counted in the same blocks.
               "--block-size", str(prefix_cache.BLOCK_TOKENS),
               "--disaggregation-mode", ROLE_MODE[self.role]]
        if self.bandwidth_gb_s is not None:
            # Without a bandwidth the mocker charges no transfer time at all.
            out += ["--kv-transfer-bandwidth", f"{self.bandwidth_gb_s:.6g}",
                    "--kv-transfer-timing-mode", "destination_missing"]
        if self.bootstrap_port is not None:
            out += ["--bootstrap-ports", str(self.bootstrap_port)]
        return out


def mockers(cfg: StackConfig, sizing: StackSizing) -> list[Mocker]:
    """One mocker per replica. A disaggregated worker uses the throughput of its transfer path
    (the slowest one when a group has several)."""
    workers = []
    for g in cfg.workers:
        paths = [t for t in sizing.transfers if g.name in (t.from_group, t.to_group)]
        bandwidth = min(t.throughput_bytes_per_s for t in paths) / 1e9 if paths else None
        for i in range(g.replicas):
            workers.append(Mocker(g.name, g.role, i, sizing.kv_bytes_per_token, bandwidth))
    return workers


class Twin:
    """Context manager: starts the twin, waits until every worker registered, stops it all on exit."""

    def __init__(self, cfg: StackConfig, sizing: StackSizing, ready_timeout: float = 120, log=None):
        self.cfg = cfg
        self.workers = [dataclasses.replace(w, bootstrap_port=free_port()) if w.role == "prefill" else w
                        for w in mockers(cfg, sizing)]
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # Model dir, discovery files and logs; removed with the twin.
        self.dir = Path(tempfile.mkdtemp(prefix="dynamo-lab-twin-"))
        self.model_dir = self.dir / "model"
        self.ready_timeout = ready_timeout
        self.procs: list[subprocess.Popen] = []
        self.log = log or (lambda msg: None)
        self._signals = contextlib.ExitStack()

    # -- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> "Twin":
        self._signals.enter_context(sigterm_as_interrupt())
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _spawn(self, name: str, args: list[str]) -> None:
        # DYN_HTTP_RPC_HOST: the mockers' handoff servers listen on loopback only.
        env = {**os.environ, "DYN_FILE_KV": str(self.dir / "kv"), "PYTHONUNBUFFERED": "1",
               "DYN_HTTP_RPC_HOST": "127.0.0.1"}
        logf = open(self.dir / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen([str(twin_python()), *args], env=env, stdout=logf, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, cwd=self.dir)
        proc.log_file = logf  # type: ignore[attr-defined]
        proc.name = name  # type: ignore[attr-defined]
        self.procs.append(proc)

    def _start(self) -> None:
        m = self.cfg.model
        heads = m.attention_heads or m.kv_heads
        spec = {"name": m.name, "layers": m.layers, "kv_heads": m.kv_heads, "head_dim": m.head_dim,
                "hidden_size": m.hidden_size or heads * m.head_dim, "attention_heads": heads,
                "dtype": m.dtype, "max_len": 40960}
        subprocess.run([str(twin_python()), model_dir_script.__file__, str(self.model_dir),
                        json.dumps(spec)], check=True, capture_output=True, timeout=120)
        (self.dir / "kv").mkdir(exist_ok=True)
        self.log(f"twin: frontend on {self.url} (router {self.cfg.frontend.router_mode}), "
                 f"{len(self.workers)} mocker workers")
        self._spawn("frontend", ["-m", "dynamo.frontend", "--http-port", str(self.port),
                                 "--router-mode", self.cfg.frontend.router_mode,
                                 "--discovery-backend", "file", "--request-plane", "tcp", "--event-plane", "zmq"])
        for w in self.workers:
            self._spawn(f"{w.group}-{w.index}", w.args(self.model_dir, m.name))
        self._wait_ready()

    def _registered(self) -> int:
        mdc = self.dir / "kv" / "v1" / "mdc"
        return len(list(mdc.iterdir())) if mdc.is_dir() else 0

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    raise TwinError(f"twin process {p.name} exited with {p.returncode}:\n{self._tail(p.name)}")
            if self._registered() >= len(self.workers) and model_listed(self.url, self.cfg.model.name, timeout=2):
                return
            time.sleep(0.25)
        raise TwinError(f"twin not ready after {self.ready_timeout:.0f} s: {self._registered()} of "
                        f"{len(self.workers)} workers registered")

    def _tail(self, name: str, lines: int = 20) -> str:
        path = self.dir / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.strip().splitlines()[-lines:])

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                _signal_group(p, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(p, signal.SIGKILL)
                p.wait()
            _signal_group(p, signal.SIGKILL)  # anything the process left in its group
            p.log_file.close()
        if self.procs:
            cleaned(f"stopped the twin's {len(self.procs)} processes (frontend and mocker workers)")
        self.procs = []
        self._signals.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


"""A discrete-event model of one serving graph under the benchmark's closed-loop load.

What it models, because the lab's table shows it growing with load (docs/predictor.md):
- GPUs shared by time-slicing: each GPU is a processor-sharing server; every worker on it runs
  vLLM-like engine steps (prefill tokens up to a token budget, plus one token per running
  request), and k workers with a step in flight each progress at 1/k speed.
- Prefix caches: each worker keeps an LRU cache of KV blocks: a prefix's reusable blocks, and each
  finished request's own tail until evicted. As in vLLM, a cached prefix's blocks are shared and
  reference-counted: a request in flight that uses one holds a reference and pins only its own
  tail, and a prefix is evictable only while no request references it. A prefill or aggregated
  worker computes only what it lacks; a decode worker pulls only what it lacks (vLLM 0.31.0's
  NixlPullConnector).
- Routing as Dynamo 1.x does it: a prefill or aggregated worker by the KV router's cost
  (overlap-weighted blocks to compute + active blocks); a decode worker by load only (fewest active
  blocks), since decode workers publish no KV events.
- Transfers on a shared path: each same-node path and the cross-node link is a processor-sharing
  server of the path's throughput, so concurrent transfers slow each other.
- Closed-loop clients, as AIPerf drives them: `concurrency` requests in flight, each client sending
  the next request when the last one completes; each request draws one of `prefix_types` prefixes.
"""

from __future__ import annotations

import itertools
import random
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Optional

from infra import prefix_cache
from infra.lab.predict.events import EPS, Sharing, Sim


@dataclass
class Request:
    id: int
    prefix: int
    input_tokens: int
    output_tokens: int
    sent: float
    first_token: Optional[float] = None
    done: Optional[float] = None
    prefilled: Optional[float] = None  # its prompt's prefill finished (the first worker's last chunk)
    joined: Optional[float] = None  # its KV arrived on the decode worker (disaggregated only)
    to_compute: int = 0  # prompt tokens the current worker must prefill
    generated: int = 0
    blocks: int = 0
    pinned: int = 0  # blocks it holds privately on its current worker
    shares_prefix: bool = False  # holds a reference on its current worker's cached prefix


class Cache:
    """A worker's prefix cache in blocks: prefixes (reusable) and tails (never reused), LRU eviction.

    As vLLM's block pool does it, a cached prefix's blocks are shared and reference-counted: every
    request in flight that uses them holds a reference (`acquire`), and they count once however
    many requests hold one; a prefix is evictable only while no request references it. `pinned` is
    the blocks requests in flight hold privately (their own tails, and a prefix not yet cached).
    """

    def __init__(self, capacity_blocks: int) -> None:
        self.capacity = capacity_blocks
        self.items: OrderedDict = OrderedDict()
        self.used = 0  # cached blocks, referenced or not
        self.pinned = 0  # private blocks of requests in flight, not evictable
        self.refs: dict = {}  # key -> requests in flight referencing it

    def has(self, key) -> bool:
        if key in self.items:
            self.items.move_to_end(key)
            return True
        return False

    def acquire(self, key) -> bool:
        """A request takes a reference on a cached entry: True if it was cached (now unevictable)."""
        if not self.has(key):
            return False
        self.refs[key] = self.refs.get(key, 0) + 1
        return True

    def release(self, key) -> None:
        self.refs[key] -= 1
        if not self.refs[key]:
            del self.refs[key]

    def insert(self, key, blocks: int) -> bool:
        """Cache `blocks` under `key`, evicting unreferenced entries, least recent first; True if
        `key` is cached afterwards."""
        if key in self.items:
            self.items.move_to_end(key)
            return True
        if self.used + blocks + self.pinned > self.capacity:
            victims = []
            free = self.capacity - self.used - self.pinned
            for k, size in self.items.items():
                if free >= blocks:
                    break
                if k not in self.refs:
                    victims.append(k)
                    free += size
            for k in victims:
                self.used -= self.items.pop(k)
        if self.used + blocks + self.pinned <= self.capacity:
            self.items[key] = blocks
            self.used += blocks
            return True
        return False


@dataclass
class Worker:
    name: str
    role: str  # agg | prefill | decode
    gpu: Sharing
    node: str
    prefill_tokens_per_s: float
    decode_scale: float
    cache: Cache
    waiting: list = field(default_factory=list)
    running: list = field(default_factory=list)
    busy: bool = False
    active_blocks: int = 0


@dataclass(frozen=True)
class Timing:
    """The engine and system constants of one lab (see params.py for values and their sources)."""

    frontend_s: float
    step_cpu_s: float  # an engine step's host-side cost (scheduling, launches): each worker has its own CPU
    decode_gpu_s: float  # a decode step's GPU time with one running request (shared when time-sliced)
    decode_per_request_gpu_s: float  # what each further running request adds
    transfer_s: float  # fixed cost of one KV transfer (handshake, notification, scheduling)
    overlap_weight: float = 1.0  # the KV router's kv_overlap_score_weight
    token_budget: int = 8192  # vLLM max_num_batched_tokens


@dataclass(frozen=True)
class WorkerSpec:
    name: str
    role: str
    gpu: str
    node: str
    prefill_tokens_per_s: float
    decode_scale: float
    cache_blocks: int


@dataclass(frozen=True)
class Load:
    prefix_types: int
    prefix_tokens: int
    input_tokens: int
    output_tokens: int
    kv_bytes_per_token: int
    block_tokens: int = prefix_cache.BLOCK_TOKENS


@dataclass
class Stats:
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    transfers: int = 0
    warm_transfers: int = 0

    @property
    def prefill_cache_ratio(self) -> float:
        return self.cached_prompt_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def decode_hit_ratio(self) -> Optional[float]:
        return self.warm_transfers / self.transfers if self.transfers else None


class Graph:
    """The workers, GPUs and transfer paths of one stack, under one closed-loop load."""

    def __init__(self, specs: list[WorkerSpec], paths: dict[tuple[str, str], float], timing: Timing,
                 load: Load, stream: int) -> None:
        self.sim = Sim()
        self.timing, self.load = timing, load
        self.rng = random.Random(stream)  # one numbered random stream per simulated graph
        self.gpus = {s.gpu: Sharing(self.sim, 1.0) for s in specs}
        self.workers = [Worker(s.name, s.role, self.gpus[s.gpu], s.node, s.prefill_tokens_per_s, s.decode_scale,
                               Cache(s.cache_blocks)) for s in specs]
        # (prefill node, decode node) -> a shared path of that many bytes/s
        self.paths = {k: Sharing(self.sim, bps) for k, bps in paths.items()}
        reusable = prefix_cache.reusable_prefix_tokens(load.prefix_tokens, load.block_tokens)
        self.prefix_blocks = reusable // load.block_tokens
        self.request_blocks = prefix_cache.blocks(load.input_tokens + load.output_tokens, load.block_tokens)
        self.completed: list[Request] = []
        self.stats = Stats()
        self._ids = itertools.count()

    # -- routing ---------------------------------------------------------------------------------

    def _pick_by_kv(self, candidates: list[Worker], req: Request) -> Worker:
        best, best_cost = [], None
        for w in candidates:
            overlap = self.prefix_blocks if req.prefix in w.cache.items else 0
            cost = self.timing.overlap_weight * (self.request_blocks - overlap) + w.active_blocks
            if best_cost is None or cost < best_cost - EPS:
                best, best_cost = [w], cost
            elif abs(cost - best_cost) <= EPS:
                best.append(w)
        return self.rng.choice(best)

    def _pick_by_load(self, candidates: list[Worker]) -> Worker:
        least = min(w.active_blocks for w in candidates)
        return self.rng.choice([w for w in candidates if w.active_blocks == least])

    # -- request lifecycle -----------------------------------------------------------------------

    def send(self, client: Callable[[Request], None]) -> None:
        load = self.load
        req = Request(next(self._ids), self.rng.randrange(load.prefix_types), load.input_tokens, load.output_tokens,
                      self.sim.now, blocks=self.request_blocks)
        req.client = client  # type: ignore[attr-defined]
        self.sim.at(self.sim.now + self.timing.frontend_s, self._route, req)

    def _route(self, req: Request) -> None:
        first = [w for w in self.workers if w.role in ("agg", "prefill")]
        self._admit(self._pick_by_kv(first, req), req)

    def _admit(self, w: Worker, req: Request) -> None:
        reusable = self.prefix_blocks * self.load.block_tokens if self._hold(w, req) else 0
        req.to_compute = req.input_tokens - reusable
        self.stats.prompt_tokens += req.input_tokens
        self.stats.cached_prompt_tokens += reusable
        w.active_blocks += req.blocks
        w.waiting.append(req)
        self._step(w)

    def _hold(self, w: Worker, req: Request) -> bool:
        """A request arrives on a worker: it references the cached prefix if there is one and pins
        only the rest of its blocks, or pins them all; True if the prefix was cached."""
        req.shares_prefix = w.cache.acquire(req.prefix)
        req.pinned = req.blocks - self.prefix_blocks if req.shares_prefix else req.blocks
        w.cache.pinned += req.pinned
        return req.shares_prefix

    def _cache_prefix(self, w: Worker, req: Request) -> None:
        """The prefix's blocks are complete on this worker: they become its cached, shared prefix
        (or, if another request cached it meanwhile, the request shares that one and frees its own)."""
        if req.shares_prefix:
            w.cache.has(req.prefix)
            return
        w.cache.pinned -= self.prefix_blocks
        if w.cache.insert(req.prefix, self.prefix_blocks) and w.cache.acquire(req.prefix):
            req.pinned -= self.prefix_blocks
            req.shares_prefix = True
        else:
            w.cache.pinned += self.prefix_blocks  # no room to cache it: the request keeps them privately

    def _release(self, w: Worker, req: Request) -> None:
        w.active_blocks -= req.blocks
        w.cache.pinned -= req.pinned
        if req.shares_prefix:
            w.cache.release(req.prefix)
        req.pinned, req.shares_prefix = 0, False
        w.cache.insert(("tail", req.id), req.blocks - self.prefix_blocks)

    def _step(self, w: Worker) -> None:
        if w.busy or not (w.waiting or w.running):
            return
        t = self.timing
        budget = t.token_budget - len(w.running)
        chunk: list[tuple[Request, int]] = []
        for req in w.waiting:
            if budget <= 0:
                break
            n = min(req.to_compute, budget)
            chunk.append((req, n))
            budget -= n
        prefill_tokens = sum(n for _, n in chunk)
        gpu = prefill_tokens / w.prefill_tokens_per_s
        if w.running:
            gpu += w.decode_scale * (t.decode_gpu_s + t.decode_per_request_gpu_s * (len(w.running) - 1))
        w.busy = True
        decoding = list(w.running)
        done = lambda: self._stepped(w, chunk, decoding)  # noqa: E731
        self.sim.at(self.sim.now + t.step_cpu_s, w.gpu.submit, gpu, done)

    def _stepped(self, w: Worker, chunk: list[tuple[Request, int]], decoding: list[Request]) -> None:
        now = self.sim.now
        w.busy = False
        for req in decoding:
            req.generated += 1
            if req.first_token is None:
                req.first_token = now
            if req.generated >= req.output_tokens:
                w.running.remove(req)
                self._finish(w, req)
        for req, n in chunk:
            req.to_compute -= n
            if req.to_compute > 0:
                continue
            w.waiting.remove(req)
            req.prefilled = now
            self._cache_prefix(w, req)
            if w.role == "agg":
                req.first_token, req.generated = now, 1
                w.running.append(req)
            else:
                self._release(w, req)
                self._hand_off(w, req)
        self._step(w)

    def _hand_off(self, prefill: Worker, req: Request) -> None:
        decode = self._pick_by_load([w for w in self.workers if w.role == "decode"])
        decode.active_blocks += req.blocks
        cached = self.prefix_blocks * self.load.block_tokens if self._hold(decode, req) else 0
        self.stats.transfers += 1
        self.stats.warm_transfers += bool(cached)
        nbytes = (req.input_tokens - cached) * self.load.kv_bytes_per_token
        path = self.paths[(prefill.node, decode.node)]

        def arrived() -> None:
            self.sim.at(self.sim.now + self.timing.transfer_s, self._join, decode, req)
        path.submit(nbytes, arrived)

    def _join(self, decode: Worker, req: Request) -> None:
        req.joined = self.sim.now
        self._cache_prefix(decode, req)
        decode.running.append(req)
        self._step(decode)

    def _finish(self, w: Worker, req: Request) -> None:
        req.done = self.sim.now
        self._release(w, req)
        self.completed.append(req)
        req.client(req)  # type: ignore[attr-defined]

    # -- load --------------------------------------------------------------------------------------

    def run(self, concurrency: int, requests: int, stop_after: Optional[int] = None) -> list[Request]:
        """One benchmark run: `requests` requests, `concurrency` in flight; returns the completed ones
        in completion order, all of them, or the first `stop_after`."""
        sent = 0
        start = len(self.completed)
        wanted = requests if stop_after is None else min(stop_after, requests)

        def client(_done: Optional[Request] = None) -> None:
            nonlocal sent
            if sent < requests:
                sent += 1
                self.send(client)

        for _ in range(min(concurrency, requests)):
            client()
        self.sim.run(until=lambda: len(self.completed) - start >= wanted)
        return self.completed[start:start + wanted]

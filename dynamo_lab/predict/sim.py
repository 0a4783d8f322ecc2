"""A discrete-event model of one serving graph under the benchmark's load.

What it models, because the lab's table shows it growing with load (docs/predictor.md):
- vLLM 0.31.0's scheduler on every worker (vllm/v1/core/sched/scheduler.py, schedule): each step
  first schedules the running requests in order (a decode token each, or the next chunk of a
  prompt), then admits waiting ones first come first served, within the batched-token budget and
  `max_num_seqs` (costs.Limits). A request is admitted only if its step's blocks can be allocated
  (kvcache.Cache); a waiting request that cannot be stops admission (no overtaking). A running
  request whose next block cannot be allocated preempts the last-admitted running request, which
  frees its blocks and waits again to be recomputed from its first token (RECOMPUTE).
- Chunked prefill as vLLM 0.31.0 runs it by default: a step's prompt tokens are bounded only by
  what the running requests before them left of `max_num_batched_tokens`, so on an aggregated
  worker a prefill chunk of up to the whole budget runs in the same step as every running decode,
  and each of those decodes' next token waits for the chunk (the step's time is its roofline over
  all of its tokens). vLLM's `long_prefill_token_threshold`, which would cap a chunk below the
  budget, is 0, off, unless given (vllm/config/scheduler.py SchedulerConfig; applied in
  vllm/v1/core/sched/scheduler.py `schedule` only when it is above 0); one given in a stack's
  extraArgs is not read (docs/predictor.md, "Known limits").
  A decode worker's steps hold only decodes (and the one recomputed prompt token of each request
  whose KV has just landed). Each output token's time is the end of the step that sampled it
  (Request.token_times): the predictor's inter-token latency is the gaps between them.
- Disaggregation as vLLM's NixlConnector does it: the prefill worker keeps a request's blocks
  until the decode worker has pulled them; the decode worker admits a request only with blocks
  for its whole prompt, pulls only what its own prefix cache lacks, notices the pull at its next
  step, and recomputes the prompt's last token to produce the first one.
- GPUs shared by time-slicing: each GPU is a processor-sharing server of the steps in flight on it;
  a step's GPU time is its roofline on the card (costs.step_seconds). The host side of a step is
  each worker's own and is not shared.
- vLLM 0.31.0's engine core with async scheduling, its default (costs.BATCH_QUEUE, costs.pipelined):
  a worker schedules and launches its next step (the engine core's host time: scheduling, input
  preparation, launches) while the GPU runs the last, up to 2 steps queued; a step's outputs are
  processed once the next step is launched, then handled by the worker's own process (each
  sampled request's output cost, costs.output_seconds), which delays the token, not the next
  step. What it cannot overlap: NixlConnector's copies between GPU blocks and host buffers are
  synchronous after the forward (nixl/base_worker.py, save_kv_to_host and sync_recved_kv_to_device:
  "intentionally synchronous"), so a step that copies holds the engine core until its GPU time and
  the copy are done: on a prefill worker with CPU buffers every step, so a finished prefill's
  answer waits for the next step's forward and copy; on a decode worker the step that notices a
  landed pull. A decode worker learns that a pull landed in the next step it launches (the
  connector's get_finished after the forward's launch) and schedules the request once that step's
  outputs are processed.
- Prefix caches and routing as Dynamo 1.6 does it: a prefill or aggregated worker by the KV
  router's cost over what its slot tracker holds (router.py: prompt tokens still to prefill, less
  the cached prefix, plus unique active blocks, a prefix shared by requests in flight counted
  once), a decode worker by load (fewest active blocks).
- Transfers as flows on a shared path (events.Sharing): each flow at most the TCP software path's
  rate, all of a path's flows together at most its capacity: the link across nodes; on one node
  the host's TCP software path, which every same-node flow of that host goes through, in the
  order posted (placement.py); a transfer between workers of tensorParallel above 1 is its
  rank-to-rank reads side by side (infra/kv_ranks.py).
- Noise where the system has it: each request's frontend time varies both ways (a lognormal
  factor); a step's GPU time only grows above its roofline (interference slows a kernel, nothing
  speeds it past the card), so no step is faster than its bytes at the full DRAM bandwidth or its
  FLOPs at the peak (params.py). Concurrent clients do not move in lockstep.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Optional

from dynamo_lab.predict.costs import (
    BATCH_QUEUE,
    Card,
    Limits,
    copy_seconds,
    output_seconds,
    step_costs,
)
from dynamo_lab.predict.events import EPS, Sharing, Sim
from dynamo_lab.predict.kvcache import Cache
from dynamo_lab.predict.router import Shape, SlotTracker, cost, prefill_tokens
from dynamo_lab.predict.specs import Load, PathSpec, Stats, Timing, WorkerSpec
from infra import prefix_cache

__all__ = ["ServingGraph", "Load", "PathSpec", "Request", "Stalled", "Stats", "Timing", "Worker", "WorkerSpec"]


class Stalled(RuntimeError):
    """The graph cannot finish its requests: a worker's pool is smaller than one request needs."""


@dataclass(eq=False)  # one request is itself only: the workers' lists find it by identity, not by its fields
class Request:
    id: int
    prefix: int
    input_tokens: int
    output_tokens: int
    sent: float
    first_token: Optional[float] = None
    done: Optional[float] = None
    # When each output token reached the client: the end of the step that sampled it on the worker
    # that streams (aggregated or decode; a prefill worker's sampled token is not sent, the decode
    # worker recomputes it). The gaps between them are the request's inter-token latencies.
    token_times: list = field(default_factory=list)
    prefilled: Optional[float] = None  # its prompt's prefill finished (the first worker's last chunk)
    joined: Optional[float] = None  # its KV arrived on the decode worker (disaggregated only)
    generated: int = 0  # tokens sampled or scheduled to be (vLLM's output placeholders count)
    emitted: int = 0  # of them, those whose step's outputs its current worker has processed
    computed: int = 0  # tokens whose KV its current worker holds or has scheduled (vLLM counts them at scheduling)
    preemptions: int = 0  # a step scheduled before the last preemption is stale for it
    pinned: int = 0  # blocks it holds privately on its current worker
    shares_prefix: bool = False  # holds a reference on its current worker's cached prefix
    remote: bool = False  # on a decode worker, its prompt's KV comes from the prefill worker
    pull_tokens: int = 0  # prompt tokens the decode worker pulls (what its prefix cache lacks)
    source: Optional[tuple] = None  # (prefill worker, pinned, shares_prefix) held until pulled
    client: Optional[Callable] = None
    booked_prefill: int = 0  # the prefill tokens the router booked for it (router.prefill_tokens)

    @property
    def known(self) -> int:
        """Tokens whose KV a worker needs before sampling the next one."""
        return self.input_tokens + self.generated


@dataclass
class Worker:
    name: str
    role: str  # agg | prefill | decode
    gpu: Sharing
    node: str
    card: Card
    limits: Limits
    cache: Cache
    rank_kv_bytes_per_token: int  # WorkerSpec's: one rank's share of a token's KV
    waiting: deque = field(default_factory=deque)
    ready: deque = field(default_factory=deque)  # pulled KV landed; admitted before `waiting`
    running: list = field(default_factory=list)
    # The engine core (costs.pipelined): busy scheduling and launching, in a synchronous copy, or
    # waiting for its oldest step; the steps launched whose outputs it has not processed (at most
    # costs.BATCH_QUEUE); those queued for or on the GPU, in order; pulls landed it has not noticed.
    engine_busy: bool = False
    inflight: deque = field(default_factory=deque)
    stream: deque = field(default_factory=deque)
    landed: list = field(default_factory=list)
    handler_free: float = 0.0  # when the worker process's output handler is free
    active_blocks: int = 0  # decode workers, the router's view: blocks of the requests it sent here, not yet done
    slots: SlotTracker = field(default_factory=SlotTracker)  # prefill and aggregated workers, the KV router's view
    preemptions: int = 0
    group: str = ""  # the worker group it is a replica of


@dataclass(eq=False)
class Step:
    """One engine step of one worker, from its scheduling to its outputs."""

    # (request, tokens computed before, tokens now, whether it samples a token, the request's
    # preemptions when scheduled)
    scheduled: list
    host_s: float  # the engine core's (costs.host_seconds)
    gpu_s: float
    saved_tokens: int = 0  # copied from GPU blocks to the host buffer after its forward (prefill worker)
    pulls: list = field(default_factory=list)  # requests whose KV pull it starts (decode worker)
    noticed: list = field(default_factory=list)  # landed pulls its connector noticed
    gpu_done: bool = False
    waiter: Optional[Callable] = None  # the engine core waiting for its GPU time
    copy_s: float = 0.0  # its copies where its worker's processes make them after its forward (_launched)


class ServingGraph:
    """The workers, GPUs and transfer paths of one stack, under one load."""

    def __init__(self, specs: list[WorkerSpec], paths: dict[tuple[str, str], PathSpec], timing: Timing,
                 load: Load, stream: int) -> None:
        self.sim = Sim()
        self.timing, self.load = timing, load
        self.rng = random.Random(stream)  # one numbered random stream per simulated graph
        self.gpus = {s.gpu: Sharing(self.sim, 1.0) for s in specs}
        self.workers = [Worker(s.name, s.role, self.gpus[s.gpu], s.node, s.card, s.limits, Cache(s.cache_blocks),
                               s.rank_kv_bytes_per_token, group=s.group) for s in specs]
        self.cpu_buffers = {s.name: s.cpu_buffers for s in specs}
        # The rank-to-rank reads one transfer of a (prefill group, decode group) pair takes side by side.
        self.flows = {(pg, dg): n for p in paths.values() for pg, dg, n in p.rank_flows}
        # (prefill node, decode node) -> the path every flow between them shares
        self.paths = {k: Sharing(self.sim, p.capacity, p.per_flow, p.in_order) for k, p in paths.items()}
        self.prefix_tokens = prefix_cache.reusable_prefix_tokens(load.prefix_tokens, load.block_tokens)
        self.prefix_blocks = self.prefix_tokens // load.block_tokens
        self.request_blocks = self.blocks(load.input_tokens + load.output_tokens)
        self.shape = Shape(load.block_tokens, load.input_tokens, self.prefix_blocks)
        self.completed: list[Request] = []
        self.stats = Stats()
        self.shaken: set = set()  # (prefill, decode) worker pairs whose NIXL agents have met
        self._ids = itertools.count()
        self._ends_at = math.inf  # the completions at which the run in progress ends (_run_until)
        for w in self.workers:
            tokens = load.input_tokens + (0 if w.role == "prefill" else load.output_tokens)
            if w.cache.capacity < self.blocks(tokens):
                raise Stalled(f"worker {w.name}'s KV pool holds {w.cache.capacity} blocks, fewer than the "
                              f"{self.blocks(tokens)} one request's {tokens:,} tokens need: vLLM could never run "
                              "it (nor start, with its max_model_len above the pool)")

    def blocks(self, tokens: int) -> int:
        return math.ceil(tokens / self.load.block_tokens)

    def _jitter(self, sigma: float) -> float:
        """A lognormal factor of median 1 (a cost's run-to-run spread, either way: a Python service's
        time has no floor the model knows)."""
        return math.exp(self.rng.gauss(0.0, sigma)) if sigma else 1.0

    def _slowdown(self, scale: float) -> float:
        """A factor of at least 1 on a step's GPU time, 1 + |N(0, scale)| (a half-normal, mean 0.8 x
        scale): what interference adds (the card lowering its clocks under its power limit, another
        context's work and cache traffic on a time-sliced GPU, gaps between kernels). The roofline
        it multiplies is already at or above the step's floor, so no step moves its bytes faster
        than the DRAM bandwidth or its FLOPs faster than the peak."""
        return 1.0 + abs(self.rng.gauss(0.0, scale)) if scale else 1.0

    # -- routing ---------------------------------------------------------------------------------

    def _pick_by_kv(self, candidates: list[Worker], req: Request) -> Worker:
        best, best_cost = [], None
        for w in candidates:
            c = cost(w.slots, self.shape, req.prefix, req.prefix in w.cache.items, self.timing.prefill_load_scale)
            if best_cost is None or c < best_cost - EPS:
                best, best_cost = [w], c
            elif abs(c - best_cost) <= EPS:
                best.append(w)
        return self.rng.choice(best)

    def _pick_by_load(self, candidates: list[Worker]) -> Worker:
        least = min(w.active_blocks for w in candidates)
        return self.rng.choice([w for w in candidates if w.active_blocks == least])

    # -- request lifecycle -----------------------------------------------------------------------

    def send(self, client: Callable[[Request], None]) -> None:
        load = self.load
        req = Request(next(self._ids), self.rng.randrange(load.prefix_types), load.input_tokens, load.output_tokens,
                      self.sim.now, client=client)
        delay = self.timing.frontend_s * self._jitter(self.timing.frontend_jitter)
        self.sim.at(self.sim.now + delay, self._route, req)

    def _route(self, req: Request) -> None:
        w = self._pick_by_kv([w for w in self.workers if w.role in ("agg", "prefill")], req)
        cached = req.prefix in w.cache.items
        self.stats.prompt_tokens += req.input_tokens
        if cached:
            self.stats.cached_prompt_tokens += self.prefix_tokens
        req.booked_prefill = prefill_tokens(self.shape, cached)
        w.slots.add(req.prefix, req.booked_prefill)
        w.waiting.append(req)
        self._step(w)

    def _held(self, req: Request) -> int:
        return req.pinned + (self.prefix_blocks if req.shares_prefix else 0)

    def _take_prefix(self, w: Worker, req: Request) -> bool:
        """A request starting on a worker takes a reference on its cached prefix, if there is one;
        True if it took one now."""
        if req.computed == 0 and not req.shares_prefix and w.cache.acquire(req.prefix):
            req.shares_prefix = True
            req.computed = self.prefix_tokens
            return True
        return False

    def _untake_prefix(self, w: Worker, req: Request) -> None:
        w.cache.release(req.prefix)
        req.shares_prefix, req.computed = False, 0

    def _drop(self, w: Worker, req: Request) -> None:
        """Free what a request holds on a worker, its computed tail kept cached for nothing reuses it
        (as vLLM's freed blocks stay in the free queue, evicted oldest first)."""
        w.cache.unpin(req.pinned)
        if req.pinned:
            w.cache.insert(("tail", req.id, w.name), req.pinned)
        if req.shares_prefix:
            w.cache.release(req.prefix)
        req.pinned, req.shares_prefix, req.computed = 0, False, 0

    def _grow(self, w: Worker, req: Request, tokens: int) -> bool:
        need = self.blocks(tokens) - self._held(req)
        if need <= 0:
            return True  # most decode steps: the token fits in a block it holds
        if w.cache.allocate(need):
            req.pinned += need
            return True
        return False

    def _preempt(self, w: Worker, victim: Request) -> None:
        w.running.remove(victim)
        self._drop(w, victim)
        victim.remote = False  # its pulled KV is gone: this worker recomputes it (vLLM's RECOMPUTE)
        # Its tokens in flight come back stale (below, _outputs); what it recomputes is what it has.
        victim.preemptions += 1
        victim.generated = victim.emitted
        w.preemptions += 1
        w.waiting.appendleft(victim)

    # -- the engine core's loop (vLLM 0.31.0, EngineCore.step_with_batch_queue; costs.pipelined) -----

    def _step(self, w: Worker) -> None:
        """The engine core's next move, when it is free: schedule and launch a step while fewer than
        BATCH_QUEUE are queued; else wait for the oldest one's GPU time and process its outputs."""
        if w.engine_busy:
            return
        step = self._schedule(w) if len(w.inflight) < BATCH_QUEUE else None
        if step is None and w.landed and len(w.inflight) < BATCH_QUEUE:
            # Nothing to compute, but a pull landed: vLLM's loop keeps stepping while a request waits
            # for its KV, and the connector's work runs in an empty step (kv_connector_no_forward).
            step = Step([], 0.0, 0.0)
        if step is not None:
            w.engine_busy = True
            self.sim.at(self.sim.now + step.host_s, self._launched, w, step)
        elif w.inflight:
            w.engine_busy = True
            self._after_gpu(w.inflight[0], lambda: self._outputs(w))

    def _schedule(self, w: Worker) -> Optional[Step]:
        """vLLM's scheduler: the running requests first, in order, then waiting ones; None if it
        schedules nothing. It counts the scheduled tokens computed at once, and a request whose last
        known token is scheduled as having sampled the next (a placeholder), so the next step can
        schedule that request's next token before this one's outputs are back."""
        # The running requests' loop runs for every request of every simulated step: it reads the
        # request's fields once and tests the common case (a decode token inside a block it holds)
        # before calling _grow, the same arithmetic as Request.known and _grow.
        budget = w.limits.max_num_batched_tokens
        scheduled: list[tuple[Request, int, int]] = []  # (request, tokens computed before, tokens now)
        preempted = False
        running = w.running
        prefill = w.role == "prefill"
        bt = self.load.block_tokens
        prefix_blocks = self.prefix_blocks
        i = 0
        while i < len(running) and budget > 0:
            req = running[i]
            generated = req.generated
            if generated >= (1 if prefill else req.output_tokens):
                # Its last token is already scheduled (a prefill worker's request samples one):
                # vLLM's AsyncScheduler does not schedule a step past max_tokens (scheduler.py, the
                # check on num_output_placeholders); it stays running, holding its blocks, until its
                # outputs come back.
                i += 1
                continue
            c = req.computed
            n = req.input_tokens + generated - c
            if n > budget:
                n = budget
            if -(-(c + n) // bt) - req.pinned - (prefix_blocks if req.shares_prefix else 0) <= 0:
                scheduled.append((req, c, n))  # _grow's first case: nothing to allocate
                budget -= n
                i += 1
                continue
            while not self._grow(w, req, c + n):
                preempted = True
                victim = running[-1]
                self._preempt(w, victim)
                if victim is req:
                    break
            else:
                scheduled.append((req, c, n))
                budget -= n
                i += 1
                continue
            break
        admitted = len(scheduled)  # the requests scheduled from here on are new to the running set
        pulls = []
        while not preempted and budget > 0 and len(running) < w.limits.max_num_seqs and (w.ready or w.waiting):
            queue = w.ready or w.waiting
            req = queue[0]
            if req.remote and req.joined is None:
                if not self._admit_pull(w, req):
                    break
                queue.popleft()
                pulls.append(req)
                continue
            took = not req.remote and self._take_prefix(w, req)
            n = min(req.known - req.computed, budget)
            if not self._grow(w, req, req.computed + n):
                if took:
                    self._untake_prefix(w, req)
                break
            queue.popleft()
            running.append(req)
            scheduled.append((req, req.computed, n))
            budget -= n
        if not scheduled and not pulls:
            if preempted:
                # vLLM 0.31.0's scheduler leaves the waiting queue alone in a step that preempted
                # (scheduler.py, `if not preempted_reqs`), and its engine loop runs the empty batch
                # and schedules again as soon as the batch queue has room (core.py,
                # step_with_batch_queue: an empty SchedulerOutput is queued like any other), so
                # what the preemption freed admits a waiting or pulled request there. Without
                # this a worker with nothing else in flight would never step again.
                return Step([], 0.0, 0.0)
            return None
        t = self.timing
        work = []
        entries = []
        for req, c, n in scheduled:
            work.append((c, n))
            samples = c + n >= req.input_tokens + req.generated  # it computes its last known token: it samples the next
            req.computed = c + n
            req.generated += samples
            entries.append((req, c, n, samples, req.preemptions))
        saved = self._saved_to_host(scheduled, admitted) if prefill and self.cpu_buffers[w.name] else 0
        if work:
            host, gpu = step_costs(w.card, t.efficiency, t.host, self.load.model, w.limits, work)
            gpu *= self._slowdown(t.step_noise)
        else:
            host = gpu = 0.0
        return Step(entries, host, gpu, saved_tokens=saved, pulls=pulls)

    def _launched(self, w: Worker, step: Step) -> None:
        """The step is launched: onto the worker's GPU after its earlier steps, its pulls started
        (NixlConnector's start_load_kv after the forward's launch), the pulls landed since noticed
        (its get_finished). A copy between GPU blocks and host buffers is synchronous after the
        forward in the process that runs the model: at tensorParallel 1 that is the engine core
        itself (vLLM 0.31.0's UniProcExecutor, its default for one GPU: execute_model runs in the
        engine core's thread), so the copy holds it until the step's GPU time and the copy are done;
        at tensorParallel above 1 each rank's worker process (MultiprocExecutor, the default for
        several GPUs: the engine core only enqueues the step), so the copy holds that worker's next
        step, not the engine core. Without a copy the engine core goes on at once."""
        step.noticed, w.landed = w.landed, []
        w.inflight.append(step)
        for req in step.pulls:
            self._start_pull(w, req)
        copied = step.saved_tokens
        if self.cpu_buffers[w.name]:
            copied += sum(r.pull_tokens for r in step.noticed)  # host buffer -> GPU blocks (sync_recved_kv_to_device)
        # Each rank copies its own share of the KV heads between its GPU and host buffers, side by side.
        seconds = 0.0
        if copied:  # most steps copy nothing (a decode step that notices no pull)
            seconds = copy_seconds(self.timing.host, copied * w.rank_kv_bytes_per_token)
        if w.card.ranks > 1:
            step.copy_s = seconds
        w.stream.append(step)
        if len(w.stream) == 1:
            self._to_gpu(w)
        if seconds and w.card.ranks == 1:
            self._after_gpu(step, lambda: self.sim.at(self.sim.now + seconds, self._engine_free, w))
        else:
            self._engine_free(w)

    def _engine_free(self, w: Worker) -> None:
        w.engine_busy = False
        self._step(w)

    def _to_gpu(self, w: Worker) -> None:
        """The worker's first queued step onto its GPU (a CUDA stream runs its work in order), then
        its worker processes' copy, if they make one."""
        step = w.stream[0]
        ran = (lambda: self.sim.at(self.sim.now + step.copy_s, self._gpu_done, w, step)) if step.copy_s else (
            lambda: self._gpu_done(w, step))
        if step.gpu_s > 0:
            w.gpu.submit(step.gpu_s, ran)
        else:
            ran()

    def _gpu_done(self, w: Worker, step: Step) -> None:
        w.stream.popleft()
        step.gpu_done = True
        if w.stream:
            self._to_gpu(w)
        if step.waiter is not None:
            waiter, step.waiter = step.waiter, None
            waiter()

    def _after_gpu(self, step: Step, then: Callable[[], None]) -> None:
        if step.gpu_done:
            then()
        else:
            step.waiter = then

    def _outputs(self, w: Worker) -> None:
        """The engine core processes its oldest step's outputs (Scheduler.update_from_output; its cost
        is the per-request share of the scheduler's): each finished prefill or sampled token is
        handed to the worker's process, which handles them a step at a time (costs.output_seconds)."""
        step = w.inflight.popleft()
        now = self.sim.now
        w.ready.extend(step.noticed)  # their KV is in: schedulable from the next step
        handed: list[tuple[Request, bool]] = []  # (request, its last token)
        prefill, prefix_tokens = w.role == "prefill", self.prefix_tokens
        for req, c, n, samples, preemptions in step.scheduled:
            if preemptions != req.preemptions:
                # Preempted since: vLLM 0.31.0 still delivers the token it sampled (scheduler.py,
                # _preempt_request: in-flight output marked stale, delivered on return); a prefill
                # worker's is recomputed with the request.
                if samples and not prefill:
                    if req.prefilled is None:
                        req.prefilled = now  # its prompt was prefilled: this stale token is its first
                    req.generated += 1
                    req.emitted += 1
                    last = req.emitted >= req.output_tokens
                    if last:
                        self._stop(w, req)
                    handed.append((req, last))
                continue
            if c + n >= prefix_tokens and not req.shares_prefix:
                self._cache_prefix(w, req)
            if not samples:
                continue
            if req.prefilled is None:
                req.prefilled = now
            if prefill:
                w.running.remove(req)
                self._prefill_done(w, req)
                handed.append((req, True))
                continue
            req.emitted += 1
            last = req.emitted >= req.output_tokens
            if last:
                w.running.remove(req)
                self._drop(w, req)
            handed.append((req, last))
        if handed:
            w.handler_free = max(now, w.handler_free) + output_seconds(self.timing.host, len(handed))
            self.sim.at(w.handler_free, self._handled, w, handed)
        w.engine_busy = False
        self._step(w)

    def _stop(self, w: Worker, req: Request) -> None:
        """A preempted request whose stale token was its last: finished where it waits or runs."""
        if req in w.running:
            w.running.remove(req)
        elif req in w.waiting:
            w.waiting.remove(req)
        self._drop(w, req)

    def _handled(self, w: Worker, handed: list[tuple[Request, bool]]) -> None:
        """The worker's process has handled a step's outputs: tokens stream to their clients (the
        token's time), a finished prefill's answer goes back to the router."""
        now = self.sim.now
        for req, last in handed:
            if w.role == "prefill":
                self._hand_off(w, req)
                continue
            if req.first_token is None:
                req.first_token = now
                if w.role == "agg":
                    w.slots.prefill_done(req.booked_prefill)  # the frontend saw its first token
            req.token_times.append(now)
            if last:
                self._finish(w, req)

    def _saved_to_host(self, scheduled: list[tuple[Request, int, int]], admitted: int) -> int:
        """Tokens a prefill worker copies from its GPU blocks to its host buffer after a step's forward
        (NixlConnector's save_kv_to_host, synchronous): the block ids the step's scheduler output
        gives each request (vLLM 0.31.0, nixl/base_scheduler.py `_build_save_meta` over
        kv_connector/utils.py `yield_req_data`): for a request new to the running set (from
        `admitted` on) every block it holds, its cached prefix's too, so a prefix-cache hit still
        copies the whole prompt; for a later chunk the blocks it newly took."""
        bt = self.load.block_tokens
        return sum(self.blocks(c + n) * bt if k >= admitted else (self.blocks(c + n) - self.blocks(c)) * bt
                   for k, (_, c, n) in enumerate(scheduled))

    def _cache_prefix(self, w: Worker, req: Request) -> None:
        """The prefix's blocks are complete on this worker: they become its cached, shared prefix (or,
        if another request cached it meanwhile, the request shares that one and frees its own)."""
        w.cache.unpin(self.prefix_blocks)
        if w.cache.insert(req.prefix, self.prefix_blocks) and w.cache.acquire(req.prefix):
            req.pinned -= self.prefix_blocks
            req.shares_prefix = True
        else:
            w.cache.pinned += self.prefix_blocks  # no room to cache it: the request keeps them privately

    def _prefill_done(self, prefill: Worker, req: Request) -> None:
        """The prefill is done: its blocks stay held on the prefill worker until pulled (NIXL's
        delayed free)."""
        req.source = (prefill, req.pinned, req.shares_prefix)
        req.pinned, req.shares_prefix, req.computed, req.generated, req.emitted = 0, False, 0, 0, 0
        req.remote = True

    def _hand_off(self, prefill: Worker, req: Request) -> None:
        """The prefill's answer is back: the router sends the request on to a decode worker."""
        # The router's prefill request has returned: its prefill done and its slot freed.
        prefill.slots.prefill_done(req.booked_prefill)
        prefill.slots.free(req.prefix)
        decode = self._pick_by_load([w for w in self.workers if w.role == "decode"])
        decode.active_blocks += self.request_blocks
        self.sim.at(self.sim.now + self.timing.handoff_s, self._arrive, decode, req)

    def _arrive(self, decode: Worker, req: Request) -> None:
        decode.waiting.append(req)
        self._step(decode)

    def _admit_pull(self, decode: Worker, req: Request) -> bool:
        """Blocks for the whole prompt, or it waits; then the pull of what the prefix cache lacks,
        which the step starts once launched (_start_pull)."""
        took = self._take_prefix(decode, req)
        if not self._grow(decode, req, req.input_tokens):
            if took:
                self._untake_prefix(decode, req)
            return False
        req.pull_tokens = req.input_tokens - req.computed
        self.stats.transfers += 1
        self.stats.warm_transfers += req.shares_prefix
        return True

    def _start_pull(self, decode: Worker, req: Request) -> None:
        prefill = req.source[0]
        path = self.paths[(prefill.node, decode.node)]
        pair = (prefill.name, decode.name)
        delay = 0.0 if pair in self.shaken else self.timing.handshake_s  # the agents' first metadata exchange
        self.shaken.add(pair)

        def pulled() -> None:
            self._release_source(req)
            req.joined = self.sim.now
            req.computed = req.input_tokens - 1  # vLLM recomputes the last prompt token for its logits
            if not req.shares_prefix and req.computed >= self.prefix_tokens:
                self._cache_prefix(decode, req)
            decode.landed.append(req)  # the decode worker's next launched step notices it
            self._step(decode)
        self.sim.at(self.sim.now + delay, path.submit, req.pull_tokens * self.load.model.kv_bytes_per_token, pulled,
                    self.flows.get((prefill.group, decode.group), 1))

    def _release_source(self, req: Request) -> None:
        prefill, pinned, shares = req.source
        req.source = None
        prefill.cache.unpin(pinned)
        if pinned:
            prefill.cache.insert(("tail", req.id, prefill.name), pinned)
        if shares:
            prefill.cache.release(req.prefix)
        self._step(prefill)

    def _finish(self, w: Worker, req: Request) -> None:
        """Its last token reached the client (its blocks were freed when the engine core processed it)."""
        req.done = self.sim.now
        if w.role == "agg":
            w.slots.free(req.prefix)
        else:
            w.active_blocks -= self.request_blocks
        self.completed.append(req)
        if len(self.completed) >= self._ends_at:
            self.sim.stop()  # the run's last request: it ends once this event is done
        req.client(req)

    def _run_until(self, completed: int) -> None:
        """Run the events until `completed` requests have completed in all, or none are left: the count
        is checked where it grows (_finish), not before every event."""
        self._ends_at = completed
        if len(self.completed) < completed:
            self.sim.run()
        self._ends_at = math.inf  # a later sim.run of its own (a test's `until`) runs on

    # -- load --------------------------------------------------------------------------------------

    def run(self, concurrency: int, requests: int, stop_after: Optional[int] = None) -> list[Request]:
        """One closed-loop run, as AIPerf drives it: `requests` requests, `concurrency` in flight;
        returns the completed ones in completion order, all of them, or the first `stop_after`."""
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
        self._run_until(start + wanted)
        if len(self.completed) - start < wanted:
            raise Stalled(f"{len(self.completed) - start} of {wanted} requests finished; the rest never could")
        return self.completed[start:start + wanted]

    def run_open(self, rate: float, requests: int) -> list[Request]:
        """One open-loop run: `requests` requests arriving as a Poisson process of `rate` per second,
        whatever the graph's progress (a closed loop lets a slower layout send fewer requests);
        returns them all once completed, in completion order."""
        start = len(self.completed)
        t = self.sim.now
        for _ in range(requests):
            t += self.rng.expovariate(rate)
            self.sim.at(t, self.send, lambda _done: None)
        self._run_until(start + requests)
        if len(self.completed) - start < requests:
            raise Stalled(f"{len(self.completed) - start} of {requests} requests finished; the rest never could")
        return self.completed[start:]

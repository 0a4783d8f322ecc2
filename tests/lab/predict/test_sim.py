"""The predictor's parts, each doing what its model claims."""

from __future__ import annotations

import pytest

from infra import prefix_cache
from infra.lab.predict.events import Sharing, Sim
from infra.lab.predict.sim import Cache, Graph, Load, Timing, WorkerSpec


def test_processor_sharing_splits_capacity_among_jobs():
    sim = Sim()
    link = Sharing(sim, capacity=100.0)  # e.g. bytes per second
    done = {}
    link.submit(100, lambda: done.setdefault("a", sim.now))
    sim.at(0.5, link.submit, 25, lambda: done.setdefault("b", sim.now))
    sim.run(until=lambda: len(done) == 2)
    # a runs alone for 0.5 s (50 done); then both share 50/s each: b's 25 take 0.5 s (a does 25 too);
    # then a's last 25 run alone again at 100/s.
    assert done == {"a": pytest.approx(1.25), "b": pytest.approx(1.0)}


def test_a_cache_evicts_the_least_recently_used_and_never_pinned_blocks():
    cache = Cache(capacity_blocks=300)
    cache.insert("p1", 125)
    cache.insert("p2", 125)
    assert cache.has("p1")  # p1 is now the most recent
    cache.pinned = 50
    cache.insert("p3", 125)  # needs room: p2 (least recent) goes
    assert list(cache.items) == ["p1", "p3"]
    cache.pinned = 300
    cache.insert("p4", 10)  # no room even after evicting everything: not cached
    assert "p4" not in cache.items and cache.used == 0


def _graph(specs, paths, **timing):
    t = dict(frontend_s=0.0, step_cpu_s=0.0, decode_gpu_s=0.001, decode_per_request_gpu_s=0.0, transfer_s=0.0)
    t.update(timing)
    return Graph(specs, paths, Timing(**t), Load(2, 2000, 2371, 4, 114_688), stream=1)


def test_disaggregated_transfers_on_a_shared_link_slow_each_other():
    specs = [WorkerSpec("p", "prefill", "g8", "n8", 1e9, 1.0, 10_000),
             WorkerSpec("d", "decode", "g24", "n24", 1e9, 1.0, 10_000)]
    # 2,371 tokens x 114,688 B at 115 MB/s is 2.36 s alone; two at once share the link.
    one = _graph(specs, {("n8", "n24"): 115e6}).run(concurrency=1, requests=1)
    two = _graph(specs, {("n8", "n24"): 115e6}).run(concurrency=2, requests=2)
    alone = one[0].first_token - one[0].sent
    assert alone == pytest.approx(2371 * 114_688 / 115e6, rel=0.02)
    assert max(r.first_token - r.sent for r in two) == pytest.approx(2 * alone, rel=0.05)


def test_a_warm_decode_worker_pulls_only_the_tail():
    specs = [WorkerSpec("p", "prefill", "g", "n", 1e9, 1.0, 10_000),
             WorkerSpec("d", "decode", "g", "n", 1e9, 1.0, 10_000)]
    graph = _graph(specs, {("n", "n"): 115e6})
    cold = graph.run(concurrency=1, requests=1)[0]
    graph.load = Load(1, 2000, 2371, 4, 114_688)  # the same prefix every time from here on
    graph.run(concurrency=1, requests=1)
    warm = graph.run(concurrency=1, requests=1)[0]
    assert (cold.first_token - cold.sent) / (warm.first_token - warm.sent) == pytest.approx(2371 / 371, rel=0.05)
    assert graph.stats.warm_transfers >= 1


def test_the_kv_router_sends_a_prefix_back_to_the_worker_that_holds_it():
    specs = [WorkerSpec(f"w{i}", "agg", "g", "n", 1e6, 1.0, 10_000) for i in range(3)]
    graph = _graph(specs, {})
    graph.load = Load(1, 2000, 2371, 2, 114_688)
    graph.run(concurrency=1, requests=5)
    holders = [w.name for w in graph.workers if 0 in w.cache.items]
    assert len(holders) == 1  # one worker computed the prefix; every later request went back to it
    assert graph.stats.cached_prompt_tokens == 4 * 2000


def test_requests_sharing_a_cached_prefix_reference_its_blocks_once_and_pin_only_their_tails():
    # vLLM's prefix blocks are reference-counted: 8 requests in flight on one cached prefix hold it
    # once, plus 8 private tails. A pool that holds the prefix and 8 tails, but not 8 whole
    # requests, keeps the prefix cached under that load.
    load = Load(1, 2000, 2371, 64, 114_688)
    prefix = prefix_cache.reusable_prefix_tokens(2000) // prefix_cache.BLOCK_TOKENS
    whole = prefix_cache.blocks(2371 + 64)
    tail = whole - prefix
    capacity = prefix + 8 * tail + 2 * tail  # room for two finished tails besides
    assert capacity < 8 * whole  # the old model pinned 8 whole requests: no room left for the prefix
    graph = Graph([WorkerSpec("w", "agg", "g", "n", 1e6, 1.0, capacity)], {},
                  Timing(frontend_s=0.0, step_cpu_s=0.0, decode_gpu_s=0.001, decode_per_request_gpu_s=0.0,
                         transfer_s=0.0), load, stream=1)
    graph.run(concurrency=1, requests=1)  # the prefix is cached
    (w,) = graph.workers
    for _ in range(8):
        graph.send(lambda req: None)
    graph.sim.run(until=lambda: len(w.running) == 8)  # all 8 decoding at once
    assert w.cache.refs == {0: 8} and w.cache.items[0] == prefix  # the prefix counted once
    assert w.cache.pinned == 8 * tail
    assert w.cache.used + w.cache.pinned <= capacity
    graph.stats = type(graph.stats)()
    graph.run(concurrency=8, requests=64)
    assert graph.stats.prefill_cache_ratio == pytest.approx(prefix * prefix_cache.BLOCK_TOKENS / 2371)  # all hit


def test_a_referenced_prefix_is_never_evicted_and_an_unreferenced_one_is():
    cache = Cache(capacity_blocks=300)
    cache.insert("p1", 125)
    cache.insert("p2", 125)
    assert cache.acquire("p1") and cache.acquire("p1") and not cache.acquire("p9")
    assert cache.insert("p3", 125)  # p1 is referenced, so p2 goes although p1 is older
    assert list(cache.items) == ["p1", "p3"]
    cache.release("p1")
    cache.acquire("p3")
    assert not cache.insert("p4", 100)  # p1 still referenced once, p3 referenced: no room
    cache.release("p1")
    assert cache.insert("p4", 100) and list(cache.items) == ["p3", "p4"]

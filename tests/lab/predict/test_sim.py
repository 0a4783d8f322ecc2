"""The predictor's parts, each doing what its model claims: vLLM's admission and preemption, the
prefix cache, routing, and transfers bounded by the link and the transport's software path."""

from __future__ import annotations

import dataclasses
from itertools import pairwise

import pytest

from dynamo_lab.predict import costs
from dynamo_lab.predict import sim as sim_module
from dynamo_lab.predict.costs import (
    Card,
    Efficiency,
    HostCost,
    Limits,
    ModelCost,
    step_floor_seconds,
    step_work,
    tensor_parallel,
)
from dynamo_lab.predict.events import Sharing, Sim
from dynamo_lab.predict.kvcache import Cache
from dynamo_lab.predict.sim import Load, PathSpec, ServingGraph, Stalled, Timing, WorkerSpec
from infra import prefix_cache

KV = 114_688  # Qwen3-0.6B's KV bytes per token
# A card so fast and a host so quick that only what a test looks at takes time.
FAST = Card(bandwidth=1e18, peak_flops=1e24, sustained_flops=1e24)
MODEL = ModelCost(weight_bytes=1.19e9, flops_per_token=1.2e9, attention_flops_per_pair=229_376, kv_bytes_per_token=KV)
WIDE = Limits(max_num_batched_tokens=8192, max_num_seqs=256)
BLOCKS = prefix_cache.blocks(2371 + 64)  # one request's blocks: 153


def timing(schedule_s: float = 0.0, **kw) -> Timing:
    """No cost but those given: `schedule_s` a fixed host cost per step."""
    host = HostCost(schedule_s=schedule_s, schedule_per_request_s=0.0, output_per_request_s=0.0,
                    launch_per_layer_s=0.0, piecewise_per_layer_s=0.0, graph_replay_s=0.0, host_copy_bytes_per_s=1e18)
    t = dict(frontend_s=0.0, host=host, efficiency=Efficiency(1.0), handoff_s=0.0, handshake_s=0.0,
             frontend_jitter=0.0, step_noise=0.0)
    t.update(kw)
    return Timing(**t)


def spec(name, role, node="n", blocks=10_000, card=FAST, limits=WIDE, cpu_buffers=True) -> WorkerSpec:
    """A worker of one rank: the rank holds all of a token's KV."""
    return WorkerSpec(name, role, node, node, card, limits, blocks, KV, cpu_buffers)


def load(prefix_types=2, output=4) -> Load:
    return Load(prefix_types, 2000, 2371, output, MODEL)


def graph(specs, paths=None, t=None, ld=None) -> ServingGraph:
    return ServingGraph(specs, paths or {}, t or timing(), ld or load(), stream=1)


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


def test_a_stopped_run_ends_once_the_event_that_stopped_it_is_done_and_a_later_run_goes_on():
    sim = Sim()
    seen: list[float] = []
    for t in (1.0, 2.0, 3.0):
        sim.at(t, seen.append, t)
    sim.at(2.0, sim.stop)  # at 2.0, after the append queued for 2.0
    sim.run()
    assert seen == [1.0, 2.0] and sim.now == 2.0
    sim.run()
    assert seen == [1.0, 2.0, 3.0]


def test_a_graphs_run_ends_at_its_last_wanted_completion_and_the_next_run_takes_the_rest():
    # A run ends where its last wanted request completes, as a check before every event would end
    # it; the requests still in flight complete in the next run, counted there.
    g = graph([spec("w", "agg")], t=timing(schedule_s=1e-3))
    first = g.run(concurrency=4, requests=8, stop_after=2)
    assert len(first) == 2 and g.sim.now == first[-1].done
    second = g.run(concurrency=1, requests=1)
    assert len(second) == 1 and g.sim.now == second[-1].done
    assert second[0] not in first


def test_work_too_small_to_move_a_late_clock_completes_instead_of_repeating_forever():
    # An open loop at a slow rate runs for hours of simulated time; near 16,400 s the clock cannot
    # add 1.4e-12 s, so a job with that much work left was rescheduled at the same instant forever.
    sim = Sim()
    sim.now = 16401.62
    link = Sharing(sim, capacity=1.0)
    link.last = sim.now
    done: list[float] = []
    link.submit(1.38e-12, lambda: done.append(sim.now))
    events = iter(range(1000))  # a bound, so the old behaviour fails here instead of hanging
    sim.run(until=lambda: bool(done) or next(events, None) is None)
    assert done == [16401.62]


def test_a_flow_never_moves_faster_than_its_own_cap_however_wide_the_path():
    sim = Sim()
    path = Sharing(sim, capacity=1000.0, per_job=100.0)
    done = {}
    for name in "ab":
        path.submit(100, lambda name=name: done.setdefault(name, sim.now))
    sim.run(until=lambda: len(done) == 2)
    assert done == {"a": pytest.approx(1.0), "b": pytest.approx(1.0)}  # each at its cap, not 500/s


def test_disaggregated_transfers_on_a_shared_link_slow_each_other():
    specs = [spec("p", "prefill", "n8"), spec("d", "decode", "n24")]
    link = {("n8", "n24"): PathSpec(capacity=115e6, per_flow=0.94e9)}
    # 2,371 tokens x 114,688 B at 115 MB/s is 2.36 s alone; two at once share the link.
    one = graph(specs, link).run(concurrency=1, requests=1)
    two = graph(specs, link).run(concurrency=2, requests=2)
    alone = one[0].first_token - one[0].sent
    assert alone == pytest.approx(2371 * KV / 115e6, rel=0.02)
    assert max(r.first_token - r.sent for r in two) == pytest.approx(2 * alone, rel=0.05)


def test_a_link_faster_than_the_transport_moves_a_pull_at_the_transports_rate():
    # A 100 Gbit/s link carries 11.5 GB/s, but one UCX TCP flow moves at the host's software path.
    specs = [spec("p", "prefill", "a"), spec("d", "decode", "b")]
    capped = graph(specs, {("a", "b"): PathSpec(capacity=11.5e9, per_flow=0.94e9)}).run(1, 1)[0]
    assert capped.first_token - capped.sent == pytest.approx(2371 * KV / 0.94e9, rel=0.02)


def test_a_job_of_several_flows_takes_a_share_for_each_and_each_its_own_cap():
    sim = Sim()
    path = Sharing(sim, capacity=1000.0, per_job=100.0)
    done = {}
    path.submit(400, lambda: done.setdefault("four", sim.now), flows=4)  # 4 x 100/s
    path.submit(100, lambda: done.setdefault("one", sim.now))  # 100/s
    sim.run(until=lambda: len(done) == 2)
    assert done == {"four": pytest.approx(1.0), "one": pytest.approx(1.0)}
    narrow = Sharing(sim, capacity=100.0, per_job=100.0)
    narrow.submit(80, lambda: done.setdefault("four-narrow", sim.now), flows=4)  # 4 of 5 shares: 80/s
    narrow.submit(20, lambda: done.setdefault("one-narrow", sim.now))  # 1 of 5: 20/s
    sim.run(until=lambda: len(done) == 4)
    assert (done["four-narrow"], done["one-narrow"]) == (pytest.approx(2.0), pytest.approx(2.0))


def _ranked(spec_: WorkerSpec, ranks: int) -> WorkerSpec:
    """A worker of `ranks` GPUs (all-reduces free: only the transfer and copies take time here), each
    rank holding its share of a token's KV (infra.resolved.Ranks)."""
    return dataclasses.replace(spec_, card=tensor_parallel(spec_.card, ranks, 1e18, 0.0),
                               rank_kv_bytes_per_token=KV // ranks, group=spec_.name)


@pytest.mark.parametrize("same_host", [False, True])
def test_a_transfer_between_ranks_moves_as_its_reads_side_by_side(same_host):
    # A TP1 prefill worker into a TP4 decode worker: 4 reads of a quarter each, each at most the
    # software path (0.94 GB/s); across a 100 Gbit/s link (11.5 GB/s) together 4x one read's rate; on
    # one node, through a host path of room for 4 flows at once (served in order), the same.
    specs = [_ranked(spec("p", "prefill", "a"), 1), _ranked(spec("d", "decode", "a" if same_host else "b"), 4)]
    nodes = ("a", "a") if same_host else ("a", "b")
    one = {nodes: PathSpec(capacity=4 * 0.94e9 if same_host else 11.5e9, per_flow=0.94e9, in_order=same_host)}
    four = {nodes: dataclasses.replace(one[nodes], rank_flows=(("p", "d", 4),))}
    alone = graph(specs, one).run(1, 1)[0]
    reads = graph(specs, four).run(1, 1)[0]
    assert alone.first_token - alone.sent == pytest.approx(2371 * KV / 0.94e9, rel=0.02)
    assert reads.first_token - reads.sent == pytest.approx(2371 * KV / 0.94e9 / 4, rel=0.02)


def test_each_rank_copies_its_share_of_the_kv_to_host_buffers():
    # A TP4 prefill worker's ranks each copy a quarter of a prompt's KV to the host, side by side.
    slow_copy = timing()
    slow_copy = dataclasses.replace(slow_copy, host=dataclasses.replace(slow_copy.host, host_copy_bytes_per_s=1e9))
    times = {}
    for ranks in (1, 4):
        specs = [_ranked(spec("p", "prefill", "a"), ranks), spec("d", "decode", "a", cpu_buffers=False)]
        r = graph(specs, {("a", "a"): PathSpec(1e18, 1e18)}, t=slow_copy).run(1, 1)[0]
        times[ranks] = r.first_token - r.sent
    assert times[1] == pytest.approx(2371 * KV / 1e9, rel=0.02)
    assert times[4] == pytest.approx(times[1] / 4, rel=0.02)


def test_a_request_that_preempts_itself_lets_the_next_step_admit_what_waits():
    # vLLM 0.31.0's scheduler skips the waiting queue in a step that preempted (scheduler.py,
    # `if not preempted_reqs`), and its engine loop schedules again at once. Here the decode
    # worker runs one request at a time (max_num_seqs 1) and a second one's pulled KV holds the
    # rest of its pool: the running request's next block preempts itself, and the next step must
    # admit the pulled one rather than leave both waiting forever. The serial model stalled here
    # (8225ab0). In the async loop the preempting request's own step is still in flight and wakes
    # the engine core when its outputs return, and the empty step vLLM queues (core.py,
    # step_with_batch_queue) is modelled too: the test guards that every request still completes.
    one_at_a_time = Limits(max_num_batched_tokens=8192, max_num_seqs=1)
    blocks = prefix_cache.blocks(2371)  # one prompt's: 149, the 150th is a 2,385th token's
    specs = [spec("p", "prefill", "a"), spec("d", "decode", "b", blocks=2 * blocks, limits=one_at_a_time)]
    g = graph(specs, {("a", "b"): PathSpec(1e9, 1e9)}, ld=Load(1, 0, 2371, 40, MODEL))
    done = g.run(concurrency=2, requests=2)
    assert len(done) == 2 and g.workers[1].preemptions >= 1


def test_a_warm_decode_worker_pulls_only_what_its_prefix_cache_lacks():
    specs = [spec("p", "prefill"), spec("d", "decode")]
    g = graph(specs, {("n", "n"): PathSpec(115e6, 115e6)}, ld=load(prefix_types=1))
    cold = g.run(concurrency=1, requests=1)[0]
    warm = g.run(concurrency=1, requests=1)[0]
    lacking = 2371 - prefix_cache.reusable_prefix_tokens(2000)
    assert (cold.first_token - cold.sent) / (warm.first_token - warm.sent) == pytest.approx(2371 / lacking, rel=0.02)
    assert g.stats.warm_transfers == 1


def test_the_prefill_worker_holds_a_requests_blocks_until_the_decode_worker_has_pulled_them():
    specs = [spec("p", "prefill", "a"), spec("d", "decode", "b")]
    g = graph(specs, {("a", "b"): PathSpec(115e6, 115e6)})
    g.send(lambda r: None)
    p, d = g.workers
    g.sim.run(until=lambda: d.cache.in_use() > 0)  # the decode worker has admitted it: the pull starts
    assert p.cache.in_use() == prefix_cache.blocks(2371)
    pulling_since = g.sim.now
    g.sim.run(until=lambda: p.cache.in_use() == 0)
    assert g.sim.now - pulling_since == pytest.approx(2371 * KV / 115e6, rel=0.01)  # freed once pulled


def test_the_kv_router_sends_a_prefix_back_to_the_worker_that_holds_it():
    g = graph([spec(f"w{i}", "agg") for i in range(3)], ld=load(prefix_types=1, output=2))
    g.run(concurrency=1, requests=5)
    holders = [w.name for w in g.workers if 0 in w.cache.items]
    assert len(holders) == 1  # one worker computed the prefix; every later request went back to it
    assert g.stats.cached_prompt_tokens == 4 * prefix_cache.reusable_prefix_tokens(2000)


def test_requests_sharing_a_cached_prefix_reference_its_blocks_once_and_hold_only_their_tails():
    prefix = prefix_cache.reusable_prefix_tokens(2000) // prefix_cache.BLOCK_TOKENS
    tail = BLOCKS - prefix
    capacity = prefix + 8 * tail + 2 * tail  # room for two finished tails besides
    assert capacity < 8 * BLOCKS  # 8 whole private requests would not fit, the prefix shared does
    g = graph([spec("w", "agg", blocks=capacity)], ld=load(prefix_types=1, output=64))
    g.run(concurrency=1, requests=1)  # the prefix is cached
    (w,) = g.workers
    for _ in range(8):
        g.send(lambda req: None)
    g.sim.run(until=lambda: len(w.running) == 8 and all(r.generated >= 2 for r in w.running))
    assert w.cache.refs == {0: 8} and w.cache.items[0] == prefix  # the prefix counted once
    assert w.cache.pinned <= 8 * tail and w.cache.in_use() <= capacity
    g.stats = type(g.stats)()
    g.run(concurrency=8, requests=64)
    assert g.stats.prefill_cache_ratio == pytest.approx(prefix * prefix_cache.BLOCK_TOKENS / 2371)  # all hit


def test_a_pool_smaller_than_one_request_is_refused_with_the_numbers():
    with pytest.raises(Stalled, match=r"worker w's KV pool holds 100 blocks, fewer than the 153 one request's "
                                      r"2,435 tokens need"):
        graph([spec("w", "agg", blocks=100)], ld=load(output=64))


def test_admission_holds_requests_that_do_not_fit_and_never_uses_more_than_the_pool():
    # Room for two whole requests (distinct prefixes: nothing shared): at concurrency 4, two wait.
    t = timing(schedule_s=0.001)
    ld = load(prefix_types=100_000, output=64)
    small = graph([spec("w", "agg", blocks=2 * BLOCKS)], t=t, ld=ld)
    big = graph([spec("w", "agg", blocks=8 * BLOCKS)], t=t, ld=ld)
    small_done, big_done = small.run(4, 16), big.run(4, 16)
    assert small.workers[0].cache.peak <= 2 * BLOCKS < big.workers[0].cache.peak
    ttft = lambda done: sorted(r.first_token - r.sent for r in done)[len(done) // 2]  # noqa: E731
    assert ttft(small_done) > 2 * ttft(big_done)


def test_a_request_preempted_with_its_first_token_in_flight_was_prefilled_when_that_token_came():
    # Async scheduling: the second request's prefill samples its first token in the step the first
    # request's next decode (its 33rd token, a third block of a 4-block pool) preempts it from.
    # vLLM 0.31.0 still delivers that token (scheduler.py, _preempt_request), so the request's
    # prompt was prefilled by then; recording its prefill only at the recompute put it after the
    # first token, and the TTFT's parts (cells.py) got a negative first-token share.
    g = graph([spec("a", "agg", blocks=4)], t=timing(schedule_s=0.001), ld=Load(1, 0, 31, 10, MODEL))
    done = g.run(concurrency=2, requests=2)
    assert g.workers[0].preemptions == 1
    assert all(r.prefilled is not None and r.sent <= r.prefilled <= r.first_token for r in done)


def test_a_running_request_that_cannot_grow_preempts_the_last_admitted_and_all_finish():
    # Two prompts fit (149 blocks each) but not two whole requests (153 each): decode runs out, the
    # later request is preempted (its blocks freed) and recomputed once the first is done.
    ld = load(prefix_types=100_000, output=64)
    g = graph([spec("w", "agg", blocks=2 * prefix_cache.blocks(2371) + 2)], t=timing(schedule_s=0.001), ld=ld)
    done = g.run(2, 8)
    (w,) = g.workers
    assert len(done) == 8 and w.preemptions > 0
    assert w.cache.peak <= w.cache.capacity


def test_max_num_seqs_caps_the_requests_running_at_once():
    one = dataclasses.replace(WIDE, max_num_seqs=1)
    g = graph([spec("w", "agg", limits=one)], t=timing(schedule_s=0.001), ld=load(prefix_types=100_000, output=8))
    (w,) = g.workers
    done, running = [], []
    for _ in range(4):
        g.send(done.append)
    g.sim.run(until=lambda: running.append(len(w.running)) or False)  # every event, to the end
    assert len(done) == 4 and max(running) == 1
    assert [r.first_token for r in done] == sorted(r.first_token for r in done)  # one after another


def test_a_prompt_longer_than_the_token_budget_takes_a_step_per_chunk():
    # Dynamo's vLLM on a 24GB card gets max_num_batched_tokens 2,048: a 2,371-token prompt is two steps.
    # Host-bound steps (0.1 s each, the GPU's time nothing): with async scheduling a step's outputs
    # come back once the next step is launched, the first decode's here, so the prompt's first
    # token takes its chunks' steps and one more.
    t = timing(schedule_s=0.1)
    narrow = graph([spec("w", "agg", limits=Limits(2048, 256))], t=t).run(1, 1)[0]
    wide = graph([spec("w", "agg")], t=t).run(1, 1)[0]
    assert narrow.first_token - narrow.sent == pytest.approx(0.3)
    assert wide.first_token - wide.sent == pytest.approx(0.2)


def test_a_card_twice_as_fast_halves_the_gpu_time():
    card = Card(bandwidth=936e9, peak_flops=71e12, sustained_flops=40e12)
    twice = Card(bandwidth=2 * 936e9, peak_flops=2 * 71e12, sustained_flops=2 * 40e12)
    slow = graph([spec("w", "agg", card=card)], ld=load(prefix_types=100_000, output=64)).run(1, 4)
    fast = graph([spec("w", "agg", card=twice)], ld=load(prefix_types=100_000, output=64)).run(1, 4)
    for a, b in zip(slow, fast, strict=True):
        assert a.first_token - a.sent == pytest.approx(2 * (b.first_token - b.sent), rel=1e-6)
        assert a.done - a.first_token == pytest.approx(2 * (b.done - b.first_token), rel=1e-6)


def test_cache_allocation_evicts_only_unreferenced_blocks_and_refuses_beyond_the_pool():
    cache = Cache(capacity_blocks=300)
    cache.insert("p1", 125)
    cache.insert("p2", 125)
    assert cache.acquire("p1") and not cache.acquire("p9")
    assert cache.allocate(150)  # p2 (unreferenced) is evicted for it; p1 stays
    assert list(cache.items) == ["p1"] and cache.in_use() == 275
    assert not cache.allocate(26)  # 25 free: refused, nothing changed
    assert cache.in_use() == 275 and cache.peak == 275
    cache.release("p1")
    assert cache.allocate(150) and "p1" not in cache.items


def test_an_open_loop_keeps_sending_at_its_rate_so_an_overloaded_graph_queues():
    # A step of 50 ms per request served one at a time: 10 requests/s arriving is below capacity
    # (20/s), 80/s far above it. A closed loop would slow its clients down instead; an open loop queues.
    one = dataclasses.replace(WIDE, max_num_seqs=1)
    t = timing(schedule_s=0.05)
    light = graph([spec("w", "agg", limits=one)], t=t, ld=load(prefix_types=100_000, output=1)).run_open(10, 60)
    heavy = graph([spec("w", "agg", limits=one)], t=t, ld=load(prefix_types=100_000, output=1)).run_open(80, 60)
    wait = lambda done: sorted(r.first_token - r.sent for r in done)[len(done) // 2]  # noqa: E731
    assert wait(light) < 0.2 < 0.8 < wait(heavy)
    assert max(r.sent for r in heavy) < 60 / 80 * 1.6 < max(r.done for r in heavy)  # arrivals kept their pace


RTX_3090 = Card(bandwidth=936e9, peak_flops=71e12, sustained_flops=40e12)


def _steps(monkeypatch, g: ServingGraph) -> list[tuple[list, float]]:
    """Every step a graph's workers put on their GPUs: (its work as costs.step_costs takes it, the
    GPU seconds submitted)."""
    asked: list = []
    steps: list = []
    real = sim_module.step_costs

    def spy(card, eff, host, m, limits, scheduled):
        asked.append(list(scheduled))
        return real(card, eff, host, m, limits, scheduled)
    monkeypatch.setattr(sim_module, "step_costs", spy)
    for gpu in g.gpus.values():
        submit = gpu.submit
        gpu.submit = lambda work, done, submit=submit: (steps.append((asked[-1], work)), submit(work, done))
    return steps


def test_noise_never_takes_a_step_below_its_dram_floor_nor_its_math_above_the_peak(monkeypatch):
    # At the bandwidth's full share (the fit's bound) a decode step's roofline IS its floor: a noise
    # of either sign (a lognormal) put about half the decode steps below it. Noise only slows a step.
    model = dataclasses.replace(MODEL, flops_per_token=2 * 440e6, flops_per_sequence=2 * 155.6e6)
    t = timing(step_noise=0.5, efficiency=Efficiency(1.0))
    g = graph([spec("w", "agg", card=RTX_3090)], t=t, ld=Load(2, 2000, 2371, 32, model))
    steps = _steps(monkeypatch, g)
    g.run(concurrency=4, requests=24)
    prefill = [(work, s) for work, s in steps if any(n > 1 for _, n in work)]
    decode = [(work, s) for work, s in steps if all(n == 1 for _, n in work)]
    assert len(prefill) >= 10 and len(decode) >= 100
    for work, seconds in steps:
        _, flops, nbytes, _ = step_work(model, work)
        assert seconds >= step_floor_seconds(RTX_3090, model, work) * (1 - 1e-12)
        assert nbytes / seconds <= RTX_3090.bandwidth * (1 + 1e-12)  # never faster than the DRAM
        assert flops / seconds <= RTX_3090.peak_flops * (1 + 1e-12)  # never above the dense peak
    # and the noise is there: steps vary above their nominal time
    assert len({round(s / step_floor_seconds(RTX_3090, model, w), 6) for w, s in decode}) > 50


def test_same_node_flows_of_every_pair_share_the_hosts_tcp_path_in_the_order_posted():
    # Two prefill/decode pairs on one host, their pulls posted together: the host's CPU-bound TCP
    # path moves one flow at its rate at a time (parallelism 1), finishing them in order.
    specs = [spec("p0", "prefill"), spec("p1", "prefill"), spec("d0", "decode"), spec("d1", "decode")]
    rate = 0.94e9
    host = {("n", "n"): PathSpec(capacity=1 * rate, per_flow=rate, in_order=True)}
    g = graph(specs, host, ld=load(prefix_types=100_000))
    done = sorted(r.joined - r.prefilled for r in g.run(concurrency=2, requests=2))
    alone = 2371 * KV / rate
    assert done == pytest.approx([alone, 2 * alone], rel=0.02)
    # two flows at once where the host moves two (parallelism 2): each alone
    wide = {("n", "n"): PathSpec(capacity=2 * rate, per_flow=rate, in_order=True)}
    both = [r.joined - r.prefilled for r in graph(specs, wide, ld=load(prefix_types=100_000)).run(2, 2)]
    assert both == pytest.approx([alone, alone], rel=0.02)


def test_a_prefill_worker_copies_every_block_of_the_prompt_to_its_host_buffer_even_on_a_prefix_hit():
    # vLLM 0.31.0's save_kv_to_host copies the block ids the scheduler gives a new request: all it
    # holds, its cached prefix's too. Only the copies cost time here: a hit costs what a miss does.
    rate = 3e9
    t = timing(host=dataclasses.replace(timing().host, host_copy_bytes_per_s=rate))
    g = graph([spec("p", "prefill"), spec("d", "decode", cpu_buffers=False)], {("n", "n"): PathSpec(1e18, 1e18)}, t,
              load(prefix_types=1))
    cold, hit = (r.prefilled - r.sent for r in (g.run(1, 1)[0], g.run(1, 1)[0]))
    assert g.workers[0].cache.items  # the second found the prefix cached
    whole = prefix_cache.blocks(2371) * prefix_cache.BLOCK_TOKENS * KV / rate
    assert cold == pytest.approx(whole) and hit == pytest.approx(whole)


# A model whose every step reads 1 GB of weights and nothing else worth counting: 10 ms a step on a
# card of 100 GB/s, whatever it schedules.
WEIGHTS_ONLY = ModelCost(weight_bytes=1e9, flops_per_token=1.0, attention_flops_per_pair=0.0, kv_bytes_per_token=1)
TEN_MS = Card(bandwidth=1e11, peak_flops=1e24, sustained_flops=1e24)


def _host_only(schedule_s: float, output_s: float = 0.0) -> Timing:
    return timing(host=dataclasses.replace(timing().host, schedule_s=schedule_s, output_per_request_s=output_s))


@pytest.mark.parametrize("schedule_s", [0.004, 0.015])
def test_the_engine_schedules_the_next_step_while_the_gpu_runs_this_one(schedule_s):
    # vLLM 0.31.0's async scheduling (its default): a worker's decode steps come max(host, GPU) apart,
    # not host + GPU; the worker process's output handling (1 ms a token here) delays each token
    # without holding the next step back.
    t = _host_only(schedule_s, output_s=0.001)
    r = graph([spec("w", "agg", card=TEN_MS)], t=t, ld=Load(1, 0, 100, 16, WEIGHTS_ONLY)).run(1, 1)[0]
    gaps = [b - a for a, b in pairwise(r.token_times)]
    # (The last token's step has no step after it to launch: it comes back once off the GPU.)
    assert gaps == pytest.approx([max(schedule_s, 0.010)] * 14 + [0.010], rel=1e-6)
    # From an idle engine the first step's host time overlaps nothing, and its outputs come back once
    # the first decode is launched: as the closed form the peer comparison prices a prefill with.
    steps = [(schedule_s, 0.010, 0.001)] * 2
    assert r.first_token - r.sent == pytest.approx(costs.pipelined(steps)[0], rel=1e-6)
    assert r.first_token - r.sent == pytest.approx(schedule_s + 0.010 + 0.001 + max(0.0, schedule_s - 0.010), rel=1e-6)


@pytest.mark.parametrize("ranks", [1, 2])
def test_a_prefill_workers_copy_to_host_buffers_holds_the_process_that_runs_its_model(ranks):
    # NixlConnector's save to host buffers is synchronous after the forward, in the process that runs
    # the model. On one GPU that is the engine core (vLLM's UniProcExecutor): it cannot run ahead of
    # the GPU, and a finished prefill's outputs come back only after the next step, forward and copy,
    # is done. Two prompts, a step each, each copy 0.1 s: the first prompt's answer leaves with the
    # second's, at 0.2 s. On two GPUs each rank's worker process (MultiprocExecutor), each copying
    # half the KV: the first answer leaves after its own copy, 0.05 s; the second step waits for it.
    rate = prefix_cache.blocks(2371) * prefix_cache.BLOCK_TOKENS * KV / 0.1
    t = timing(host=dataclasses.replace(timing().host, host_copy_bytes_per_s=rate))
    specs = [_ranked(spec("p", "prefill", limits=Limits(2371, 256)), ranks), spec("d", "decode", cpu_buffers=False)]
    done = graph(specs, {("n", "n"): PathSpec(1e18, 1e18)}, t, load(prefix_types=100_000)).run(2, 2)
    assert sorted(r.prefilled - r.sent for r in done) == pytest.approx([0.2, 0.2] if ranks == 1 else [0.05, 0.1])

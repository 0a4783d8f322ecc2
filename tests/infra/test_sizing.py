"""Sizing figures checked against the lab's numbers (docs/lab.md), and the arithmetic's properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra import units
from infra.catalogue import DEFAULT_GPU_CLASSES, SAME_NODE_BYTES_PER_SECOND
from infra.errors import ConfigError
from infra.resolved import kv_bytes_per_token
from infra.sizing import ThroughputBasis, host_memory_floor, largest_pool_for_limit
from tests.helpers import components, flag, main_container, run_stack, sized

LAB_REQUEST = 2371 * 114_688


def _report(stack, edit=None):
    return sized(stack, edit)[1]


def test_qwen3_kv_bytes_per_token_uses_the_explicit_head_dim():
    assert kv_bytes_per_token(28, 8, 128, 2) == 114_688
    # hidden_size / heads = 64 would halve it, a mistake several tools make (docs/sources.md).
    assert _report("cross-server").kv_bytes_per_token == 114_688


def test_request_is_about_272_mb_at_2371_tokens():
    r = _report("cross-server")
    assert r.kv_bytes_per_request == LAB_REQUEST
    assert 271e6 < r.kv_bytes_per_request < 273e6


WARM_REQUEST = 371 * 114_688  # the unique tail: the 2,000-token prefix is 125 whole blocks


def test_cross_server_transfer_cold_matches_the_labs_1gbe_estimate_and_warm_moves_the_tail():
    (t,) = _report("cross-server").transfers
    assert (t.from_group, t.to_group, t.path) == ("prefill", "decode", "cross-node")
    assert 110e6 <= t.throughput_bytes_per_s <= 117e6
    assert (t.cold_bytes, t.warm_bytes) == (LAB_REQUEST, WARM_REQUEST)
    assert 2.3 <= t.cold_seconds <= 2.5  # the write-up's 2.3-2.5 s for a whole request over 1GbE
    assert t.warm_seconds == pytest.approx(WARM_REQUEST / t.throughput_bytes_per_s)
    h = t.decode_prefix_hit_probability
    assert 0 < h < 1  # 24 prefix types do not all fit two 4Gi decode pools
    assert t.expected_bytes == pytest.approx(h * WARM_REQUEST + (1 - h) * LAB_REQUEST)
    assert t.in_flight_bytes == 8 * LAB_REQUEST
    assert t.transfer_over_prefill == pytest.approx(t.expected_seconds / t.prefill_seconds_estimate)
    # One shared 1GbE link carries at most 115 MB/s / the expected bytes per request.
    assert t.link_max_requests_per_s == pytest.approx(t.throughput_bytes_per_s / t.expected_bytes)


def test_fewer_prefix_types_warm_the_decode_cache():
    hits = [_report("cross-server", lambda c, p=p: c.update(workload={"prefixTypes": p})).transfers[0]
            .decode_prefix_hit_probability for p in (2, 7, 12, 24, 48)]
    assert hits == sorted(hits, reverse=True) and hits[0] > 0.99 and hits[-1] < 0.5



def test_a_tensor_parallel_decode_worker_holds_prefixes_by_its_ranks_blocks():
    # A rank's pool holds its share of each block's KV heads: a TP 2 decode worker of 2Gi a rank holds
    # as many blocks as a TP 1 worker of 4Gi (1,024 of Qwen3-32B's), so a request finds its prefix there
    # as often, and moves as many bytes.
    def decode(tp, pool):
        return sized("two-node-rdma", lambda c: c["workers"][1].update(tensorParallel=tp, kvCacheBytes=pool))[1]
    two, one = decode(2, "2Gi"), decode(1, "4Gi")
    assert two.group("decode").pool_blocks == one.group("decode").pool_blocks == 1024
    assert two.transfers[0].decode_prefix_hit_probability == one.transfers[0].decode_prefix_hit_probability
    assert two.transfers[0].expected_bytes == one.transfers[0].expected_bytes


def test_same_server_transfer_takes_the_measured_same_node_read():
    (pull,) = _report("same-server").transfers
    assert (pull.path, pull.op, pull.link_max_requests_per_s) == ("same-node", "READ", None)
    assert pull.throughput_bytes_per_s == SAME_NODE_BYTES_PER_SECOND["READ"]
    assert pull.throughput_source == "same-node NIXL READ of KV blocks (dev-machine estimate)"
    assert pull.throughput_basis is ThroughputBasis.ESTIMATE


def test_an_explicit_same_node_throughput_overrides_the_measured_default():
    (t,) = _report("same-server", lambda c: c.update(sizing={"sameNodeBytesPerSecond": "2G"})).transfers
    assert t.throughput_bytes_per_s == 2e9
    assert t.throughput_source == "same-node (sizing.sameNodeBytesPerSecond)"
    assert t.throughput_basis is ThroughputBasis.CONFIGURED


def test_cross_node_throughput_is_the_links():
    (pull,) = _report("cross-server").transfers
    assert pull.throughput_bytes_per_s == 115e6
    assert pull.throughput_basis is ThroughputBasis.LINK


def test_a_link_faster_than_the_tcp_software_path_moves_a_transfer_at_the_software_paths_rate():
    # 100 Gbit/s x 0.92 is 11.5 GB/s of wire, but UCX over TCP moves a READ at the host's 0.94 GB/s.
    (pull,) = _report("cross-server", lambda c: c.update(sizing={"link": {"rate": "100gbit"}})).transfers
    assert pull.throughput_bytes_per_s == SAME_NODE_BYTES_PER_SECOND["READ"]
    assert pull.throughput_source == ("same-node NIXL READ of KV blocks (dev-machine estimate), under the link "
                                      "100 Gbit/s x 0.92 efficiency (UCX over TCP)")
    assert pull.cold_seconds == pytest.approx(LAB_REQUEST / SAME_NODE_BYTES_PER_SECOND["READ"])


def test_measured_throughput_replaces_the_default():
    def edit(c):
        c["sizing"] = {"measured": [{"fromGroup": "prefill", "toGroup": "decode", "bytesPerSecond": "100M"}]}
    (t,) = _report("cross-server", edit).transfers
    assert t.throughput_bytes_per_s == 100e6
    assert t.cold_seconds == pytest.approx(LAB_REQUEST / 100e6)
    assert t.throughput_source.startswith("measured")
    assert t.throughput_basis is ThroughputBasis.MEASURED


def test_prefill_estimate_is_two_flops_per_parameter_a_token_multiplies_through_at_the_classs_rate():
    # Qwen3-0.6B's tied 151,936 x 1,024 embedding is looked up per token, and multiplied as the LM head
    # for the last token only; the rest, 2 FLOPs per parameter per token, at the decode class's
    # effectiveTflops (the same rate the predictor's prefill steps run at).
    (t,) = _report("cross-server").transfers
    head = 151_936 * 1024
    rate = DEFAULT_GPU_CLASSES["gpu-24gb"]["effectiveTflops"] * 1e12
    assert t.prefill_seconds_estimate == pytest.approx(2 * ((596_049_920 - head) * 2371 + head) / rate)


def test_the_labs_oom_limit_on_the_cross_server_prefill_is_rejected_with_floor_and_both_fixes():
    with pytest.raises(ConfigError) as info:
        _report("cross-server", lambda c: c["workers"][0].update(memoryLimit="3584Mi"))
    msg = str(info.value)
    assert msg.startswith("Pulumi.cross-server.yaml: workers.prefill.memoryLimit: 3584Mi is below the "
                          "5.7Gi (5837Mi) this worker needs (3.5Gi vLLM base + 2.2Gi KV host mirror")
    assert "Raise memoryLimit to at least 5837Mi" in msg
    # The smallest pool vLLM starts with: 154 blocks (2,448 tokens and the null block) of 1.75Mi.
    assert "workers.prefill.kvCacheBytes" in msg and "needs memoryLimit >= 3881Mi" in msg


def test_a_limit_that_fits_a_smaller_pool_names_the_largest_pool():
    with pytest.raises(ConfigError) as info:
        _report("cross-server", lambda c: c["workers"][0].update(memoryLimit="5Gi"))
    assert "or set workers.prefill.kvCacheBytes <= 1396Mi" in str(info.value)
    # ... and that pool really fits the limit.
    ok = _report("cross-server", lambda c: c["workers"][0].update(memoryLimit="5Gi", kvCacheBytes="1396Mi"))
    assert ok.group("prefill").host_memory_floor_bytes <= units.parse_memory("5Gi")


def test_the_labs_same_server_10gi_limits_pass_with_the_same_server_pools():
    r = _report("same-server")
    for g in r.groups:
        assert g.memory_limit_bytes == 10 * units.GI
        assert g.host_memory_floor_bytes <= g.memory_limit_bytes


def test_without_a_limit_a_worker_gets_its_floor_as_request_and_limit():
    g = _report("cross-server").group("prefill")
    assert g.memory_source == "floor"
    assert g.memory_limit_bytes == g.memory_request_bytes == g.host_memory_floor_bytes
    # 3584Mi + 2Gi x 1.1 = 5836.8Mi, rounded up to whole MiB: the pod's limit is never below it.
    assert g.host_memory_floor_bytes == 5837 * units.MI
    assert g.steady_state_bytes == 8 * LAB_REQUEST


def test_aggregated_workers_keep_the_base_figure():
    for g in _report("kv-routing").groups:
        assert not g.cpu_buffers
        assert g.host_memory_floor_bytes == units.parse_memory("3584Mi")


def test_overflowing_a_shared_24gb_gpu_is_rejected_per_worker():
    with pytest.raises(ConfigError) as info:
        _report("same-server", lambda c: c["workers"][1].update(kvCacheBytes="6Gi"))
    msg = str(info.value)
    assert "gpuClasses.gpu-24gb: the workers sharing this GPU plan 26.4Gi, more than its 21.6Gi" in msg
    assert "2 x prefill = 2 x (1.1Gi weights + 2.0Gi KV + 1.5Gi overhead)" in msg
    assert "2 x decode = 2 x (1.1Gi weights + 6.0Gi KV + 1.5Gi overhead)" in msg


def test_derived_pools_share_the_gpu_budget_evenly():
    r = _report("kv-routing")
    gpu = {g.gpu_class: g for g in r.gpus}
    assert gpu["gpu-24gb"].planned_bytes <= gpu["gpu-24gb"].budget_bytes
    assert gpu["gpu-24gb"].budget_bytes - gpu["gpu-24gb"].planned_bytes < 4 * units.MI
    assert r.group("worker-24gb").kv_cache_source == "derived"


def test_too_many_workers_for_a_gpu_is_rejected():
    with pytest.raises(ConfigError) as info:
        _report("kv-routing", lambda c: c["workers"][1].update(replicas=4))
    msg = str(info.value)
    assert msg.startswith("Pulumi.kv-routing.yaml: workers.worker-8gb.kvCacheBytes: the gpu-8gb GPU (8.0Gi, 7.2Gi "
                          "after its 10% reserve) leaves 0B of KV pool per worker for 4 workers")
    assert "Fix: run fewer workers on this GPU (each needs a pool of at least 270Mi)" in msg


def test_every_shipped_stack_passes_its_own_checks(stack):
    r = _report(stack)
    for g in r.groups:
        assert g.host_memory_floor_bytes <= g.memory_limit_bytes
        assert g.kv_cache_bytes >= r.kv_bytes_per_request
        # vLLM starts only if the pool holds one max_model_len sequence (and the null block).
        assert g.pool_blocks >= g.blocks_for_max_len
    for gpu in r.gpus:
        assert gpu.planned_bytes <= gpu.budget_bytes


def test_rendered_flags_carry_the_sizing():
    run = run_stack("cross-server")
    pools = {g["name"]: g["kv_cache_bytes"] for g in run.outputs["sizing"]["groups"]}
    assert pools == {"prefill": 2 * units.GI, "decode": 4 * units.GI}
    comps = components(run)
    for name, group in {g["name"]: g for g in run.outputs["sizing"]["groups"]}.items():
        args = main_container(comps[name])["args"]
        assert flag(args, "--kv-cache-memory-bytes") == str(pools[name])
        assert flag(args, "--gpu-memory-utilization") == f"{group['gpu_memory_utilization']:.2f}"
    # The 8GB prefill worker's share: (1.1Gi weights + 2Gi KV + 1.5Gi overhead) / 8Gi, rounded up.
    assert flag(main_container(comps["prefill"])["args"], "--gpu-memory-utilization") == "0.58"


# --- properties -----------------------------------------------------------------------------

pools = st.integers(min_value=0, max_value=64 * units.GI)
bases = st.integers(min_value=0, max_value=16 * units.GI)
headrooms = st.floats(min_value=0, max_value=100, allow_nan=False)


@given(base=bases, a=pools, b=pools, h=headrooms)
def test_floor_grows_with_the_pool_and_never_drops_below_base(base, a, b, h):
    lo, hi = sorted((a, b))
    assert base <= host_memory_floor(base, lo, h, True) <= host_memory_floor(base, hi, h, True)
    # Without a mirror: the base, rounded up to whole MiB (never below it, less than 1Mi above).
    assert 0 <= host_memory_floor(base, hi, h, False) - base < units.MI
    assert host_memory_floor(base, hi, h, True) % units.MI == 0


@given(base=bases, limit=st.integers(min_value=0, max_value=128 * units.GI), h=headrooms)
def test_largest_pool_for_a_limit_fits_that_limit(base, limit, h):
    pool = largest_pool_for_limit(limit, base, h)
    if pool > 0:
        assert host_memory_floor(base, pool, h, True) <= limit

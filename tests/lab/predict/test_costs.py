"""A step's cost from the card and the model, and the scheduler's limits, as the physics says."""

from __future__ import annotations

import dataclasses

import pytest

from dynamo_lab.predict import costs, params
from infra.catalogue import lab_effective_tflops
from infra.config.schema import GpuClass, WorkerGroup
from infra.sizing import prefill_flops_per_second, prefill_seconds_estimate
from tests.helpers import sized

RTX_3090 = costs.Card(bandwidth=936e9, peak_flops=71e12, sustained_flops=lab_effective_tflops(71) * 1e12)
PEAK = costs.Card(bandwidth=936e9, peak_flops=71e12, sustained_flops=71e12)  # a card sustaining its peak
FULL = costs.Efficiency(1.0)
# Qwen3-0.6B: 28 layers of 15,730,944 and the norm a token multiplies through; its tied 151,936 x 1,024
# embedding is looked up, and multiplied as the LM head for each request's last token only.
TOKEN_PARAMETERS = 596_049_920 - 151_936 * 1024


def qwen():
    cfg, sizing = sized("same-server")
    return costs.model_cost(cfg.model, sizing.kv_bytes_per_token)


def test_a_decode_step_reads_the_weights_then_each_running_requests_kv():
    m = qwen()
    floor = costs.step_seconds(RTX_3090, FULL, m, [(0, 1)])
    assert floor == pytest.approx(596_049_920 * 2 / 936e9, rel=0.001)  # 1.27 ms: the weights alone
    four = costs.step_seconds(RTX_3090, FULL, m, [(2400, 1)] * 4)
    per_request = (four - floor) / 4
    assert per_request == pytest.approx(2401 * 114_688 / 936e9, rel=0.01)  # each ~0.29 ms of KV read


def test_prefill_is_math_bound_with_attention_growing_with_the_context():
    m = qwen()
    short = costs.step_seconds(PEAK, FULL, m, [(0, 2048)])
    linear = (2048 * 2 * TOKEN_PARAMETERS + 2 * 151_936 * 1024) / 71e12
    assert short > linear and short < 1.3 * linear  # at 2k tokens attention adds about a tenth
    # The same 2,048 tokens at the end of a 16k context: attention now outweighs the rest.
    late = costs.step_seconds(PEAK, FULL, m, [(14_336, 2048)])
    assert late > 2 * linear


def test_the_bandwidth_efficiency_scales_the_traffic_and_a_faster_card_is_faster():
    m = qwen()
    half = costs.Efficiency(0.5)
    assert costs.step_seconds(RTX_3090, half, m, [(2400, 1)] * 4) == pytest.approx(
        2 * costs.step_seconds(RTX_3090, FULL, m, [(2400, 1)] * 4))
    twice = costs.Card(2 * 936e9, 2 * 71e12, 2 * RTX_3090.sustained_flops)
    assert costs.step_seconds(twice, FULL, m, [(2400, 1)] * 8) == pytest.approx(
        costs.step_seconds(RTX_3090, FULL, m, [(2400, 1)] * 8) / 2)
    assert costs.step_seconds(twice, FULL, m, [(0, 2048)]) == pytest.approx(
        costs.step_seconds(RTX_3090, FULL, m, [(0, 2048)]) / 2)


def test_one_prefill_efficiency_read_by_the_sizing_and_the_predictor_alike():
    # The stack's effectiveTflops is the rate of both: the sizing's prefill estimate and the
    # predictor's prefill step; halve it and both take twice as long. No second, fitted fraction.
    cfg, sizing = sized("same-server")
    m = costs.model_cost(cfg.model, sizing.kv_bytes_per_token)
    cls = cfg.gpu_classes["gpu-24gb"]
    slow = cls.model_copy(update={"effective_tflops": cls.effective_tflops / 2})
    for c in (cls, slow):
        card = costs.card("gpu-24gb", c)
        assert card.sustained_flops == prefill_flops_per_second(c) == c.effective_tflops * 1e12
        assert card.peak_flops == c.peak_tflops * 1e12
    fast_step, slow_step = (costs.step_seconds(costs.card("g", c), FULL, m, [(0, 2048)]) for c in (cls, slow))
    fast_est, slow_est = (prefill_seconds_estimate(cfg.model, 2371, prefill_flops_per_second(c)) for c in (cls, slow))
    assert slow_step == pytest.approx(2 * fast_step) and slow_est == pytest.approx(2 * fast_est)
    # The sizing's figure for the stack is that estimate at the class's own rate.
    (t,) = {t.prefill_seconds_estimate for t in sizing.transfers}
    assert t == pytest.approx(fast_est)
    # The lab's classes sustain the fitted fraction of their peak, within what prefill reaches.
    assert cls.effective_tflops == pytest.approx(71 * params.LAB.prefill_efficiency, abs=0.05)
    low, high = params.BOUNDS["prefill_efficiency"]
    assert low <= params.LAB.prefill_efficiency <= high


def _host(**kw) -> costs.HostCost:
    h = dict(schedule_s=1e-3, schedule_per_request_s=30e-6, output_per_request_s=0.3e-3, launch_per_layer_s=40e-6,
             piecewise_per_layer_s=10e-6, graph_replay_s=30e-6, host_copy_bytes_per_s=3e9)
    h.update(kw)
    return costs.HostCost(**h)


def test_host_cost_launches_grow_with_the_layers_only_where_no_cuda_graph_replays_the_step():
    cfg, sizing = sized("same-server")
    small = costs.model_cost(cfg.model, sizing.kv_bytes_per_token)  # 28 layers
    deep = dataclasses.replace(small, layers=64)
    h, limits = _host(), costs.Limits(2048, 256)
    assert limits.cudagraph_tokens == 512  # vLLM 0.31.0: min(2 x max_num_seqs, 512)
    decode = [(2400, 1)] * 64  # a decode batch within the captured sizes: one graph replay
    assert costs.host_seconds(h, deep, limits, decode) == costs.host_seconds(h, small, limits, decode)
    assert costs.host_seconds(h, small, limits, decode) == pytest.approx(1e-3 + 64 * 30e-6 + 30e-6)
    chunk = [(0, 2048)]  # beyond the captured sizes: every layer's kernels launched
    grown = costs.host_seconds(h, deep, limits, chunk) - costs.host_seconds(h, small, limits, chunk)
    assert grown == pytest.approx((64 - 28) * 40e-6)
    tail = [(1984, 387)]  # a prefill within the captured sizes: piecewise graphs, attention launched per layer
    assert costs.host_seconds(h, small, limits, tail) == pytest.approx(1e-3 + 30e-6 + 28 * 10e-6)
    assert costs.host_seconds(h, small, limits, []) == 0  # no token: nothing prepared, nothing launched
    # the worker process's output handling per sampled request; copies at their rate
    assert costs.output_seconds(h, 64) == pytest.approx(64 * 0.3e-3)
    assert costs.copy_seconds(h, 3e6) == pytest.approx(1e-3)
    # the estimates sit inside their stated ranges
    for name, (low, high) in params.ESTIMATE_RANGES.items():
        assert low <= getattr(params.LAB, name) <= high, name


def _class(memory: str) -> GpuClass:
    return GpuClass.model_validate({"memory": memory, "effectiveTflops": 40,
                                    "nodeSelector": [{"key": "a", "operator": "Exists"}]})


def _group(*args: str) -> WorkerGroup:
    return WorkerGroup.model_validate({"name": "w", "role": "agg", "gpuClass": "g", "replicas": 1,
                                       "extraArgs": list(args)})


def test_scheduler_limits_are_vllms_defaults_for_the_card_unless_the_worker_sets_them():
    assert costs.limits(_group(), _class("24564Mi")) == costs.Limits(2048, 256)
    assert costs.limits(_group(), _class("80Gi")) == costs.Limits(8192, 1024)
    assert costs.limits(_group(), _class("180Gi")) == costs.Limits(16384, 1024)
    assert costs.limits(_group("--max-num-seqs", "8", "--max_num_batched_tokens=4096"),
                        _class("24564Mi")) == costs.Limits(4096, 8)


def test_a_class_without_its_cards_figures_is_refused_naming_the_keys():
    with pytest.raises(costs.PredictError, match=r"gpuClasses\.mine: the predictor needs the card's memoryBandwidth "
                                                 r"and peakTflops .* write the card's datasheet figures"):
        costs.card("mine", _class("24564Mi"))


def test_the_default_classes_carry_the_labs_cards():
    cfg, _ = sized("same-server")
    assert costs.cards(cfg)["gpu-24gb"] == RTX_3090

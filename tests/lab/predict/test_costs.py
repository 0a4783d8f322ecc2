"""A step's cost from the card and the model, and the scheduler's limits, as the physics says."""

from __future__ import annotations

import pytest

from dynamo_lab.predict import costs
from infra.config.schema import GpuClass, WorkerGroup
from tests.helpers import sized

RTX_3090 = costs.Card(bandwidth=936e9, peak_flops=71e12)
FULL = costs.Efficiency(1.0, 1.0)


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
    short = costs.step_seconds(RTX_3090, FULL, m, [(0, 2048)])
    linear = 2048 * 2 * 596_049_920 / 71e12
    assert short > linear and short < 1.3 * linear  # at 2k tokens attention adds about a tenth
    # The same 2,048 tokens at the end of a 16k context: attention now outweighs the rest.
    late = costs.step_seconds(RTX_3090, FULL, m, [(14_336, 2048)])
    assert late > 2 * linear


def test_efficiencies_scale_the_peak_and_a_faster_card_is_faster():
    m = qwen()
    half = costs.Efficiency(0.5, 0.5)
    assert costs.step_seconds(RTX_3090, half, m, [(0, 2048)]) == pytest.approx(
        2 * costs.step_seconds(RTX_3090, FULL, m, [(0, 2048)]))
    twice = costs.Card(2 * 936e9, 2 * 71e12)
    assert costs.step_seconds(twice, FULL, m, [(2400, 1)] * 8) == pytest.approx(
        costs.step_seconds(RTX_3090, FULL, m, [(2400, 1)] * 8) / 2)


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

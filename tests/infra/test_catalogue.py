"""The lab's facts are written once: the chart version and the image tag are the same release."""

from __future__ import annotations

from infra import catalogue
from infra.config.schema import Platform, StackConfig


def test_the_chart_and_the_serving_image_are_one_dynamo_release():
    cfg = StackConfig.model_validate({"workers": [{"name": "w", "role": "agg", "replicas": 1, "gpuClass": "gpu-8gb"}]})
    assert Platform().version == catalogue.DYNAMO_RELEASE == cfg.image.rsplit(":", 1)[1]
    assert cfg.model.name == catalogue.DEFAULT_MODEL and cfg.model.layers == 28
    assert set(cfg.gpu_classes) == set(catalogue.DEFAULT_GPU_CLASSES)

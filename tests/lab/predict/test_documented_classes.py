"""Every GPU class the docs show in a stack-file snippet is one a user can copy and then predict with:
it loads, and the predictor finds the card figures it needs (memoryBandwidth, peakTflops). A class
copied from the docs without them once made `predict` exit 2."""

from __future__ import annotations

import re

import pytest
import yaml

from dynamo_lab.predict import costs
from tests.helpers import ROOT, loaded

_BLOCK = re.compile(r"```yaml\n(.*?)```", re.S)


def _documented_classes() -> list[tuple[str, str, dict]]:
    """(page, class name, class) for every class under `dynamo-lab:gpuClasses:` in a docs YAML block."""
    out = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        for block in _BLOCK.findall(page.read_text()):
            if "dynamo-lab:gpuClasses:" not in block:
                continue
            doc = yaml.safe_load(block)
            for name, cls in (doc or {}).get("dynamo-lab:gpuClasses", {}).items():
                out.append((page.name, name, cls))
    return out


CLASSES = _documented_classes()


def test_the_docs_show_gpu_classes():
    assert {page for page, _, _ in CLASSES} >= {"configuration.md", "beyond-the-lab.md"}


@pytest.mark.parametrize(("page", "name", "cls"), CLASSES, ids=[f"{p}:{n}" for p, n, _ in CLASSES])
def test_a_documented_gpu_class_loads_and_the_predictor_can_cost_it(page, name, cls):
    def edit(config):
        config["gpuClasses"] = {name: cls}
        config["workers"] = [{"name": "agg", "role": "agg", "replicas": 1, "gpuClass": name}]

    stack = loaded("kv-routing", edit)
    card = costs.card(name, stack.config.gpu_classes[name])  # PredictError (predict's exit 2) when figures lack
    assert card.bandwidth > 0 and card.peak_flops > 0

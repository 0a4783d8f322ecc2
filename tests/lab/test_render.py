"""What `render` shows of a Secret: its keys, never its values."""

from __future__ import annotations

from dynamo_lab import render
from tests.helpers import run_stack


def test_a_token_is_rendered_as_redacted_under_its_own_key_in_yaml_and_json():
    run = run_stack("cross-server", lambda c: c.update(hfToken="hf_secret_value_123"), ["dynamo-lab:hfToken"])
    for text in (render.to_yaml(run), render.to_json(run)):
        assert "hf_secret_value_123" not in text
    (secret,) = [d for d in render.manifests(run) if d.get("kind") == "Secret"]
    assert secret["stringData"] == {"HF_TOKEN": "<redacted>"}


def test_render_names_the_cluster_at_the_top():
    text = render.to_yaml(run_stack("kv-routing", lambda c: c.update({"kubernetes:context": "lab-admin@lab",
                                                                      "kubernetes:kubeconfig": "/etc/lab/kubeconfig"})))
    assert text.splitlines()[1] == "# cluster: context 'lab-admin@lab' of /etc/lab/kubeconfig"

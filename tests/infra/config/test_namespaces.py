"""Stack-file mistakes in namespaces: a key in one the program would never read, each refused with the
file, the key and the fix, and nothing registered."""

from __future__ import annotations

import pytest

from tests.helpers import raw_config, run_stack
from tests.infra.config.refusing import F, refusal

# --- namespaces: a key the program would never read ----------------------------------------------

@pytest.mark.parametrize("namespace", ["dynamo-lb", "dynamolab", "Dynamo_Lab"])
def test_a_misspelled_namespace_is_refused_with_the_key_it_meant(namespace):
    err = refusal(lambda c: c.update({f"{namespace}:image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1"}))
    assert str(err) == (
        f"{F}: {namespace}:image: unknown namespace `{namespace}:`: this program reads `dynamo-lab:` keys and "
        "`kubernetes:context` / `kubernetes:kubeconfig` only, so this key would be silently ignored; did you "
        f"mean `dynamo-lab:image`? Rename the key in {F}")


def test_a_namespace_nothing_like_the_projects_is_refused_with_the_command_to_remove_it():
    err = refusal(lambda c: c.update({"aws:region": "eu-west-1"}))
    assert str(err).endswith("so this key would be silently ignored. Remove it: pulumi config rm aws:region "
                             "--stack cross-server")


def test_pulumis_own_namespace_is_accepted():
    assert "pulumi:disable-default-providers" in raw_config("cross-server")
    run_stack("cross-server", lambda c: c.update({"pulumi:tags": {"team": "lab"}}))


def test_a_required_key_in_a_misspelled_namespace_is_named_where_it_is_missing():
    err = refusal(lambda c: c.update({"dynamo-lb:workers": c.pop("workers")}))
    assert err.problems[0][0] == "dynamo-lb:workers"
    assert f"{F}: workers: required key is missing: the stack file sets `dynamo-lb:workers`, in a misspelled " \
           "namespace; rename it `dynamo-lab:workers`" in str(err).splitlines()


def test_the_cluster_context_in_a_misspelled_namespace_is_named_where_it_is_missing():
    err = refusal(lambda c: c.update({"kubernets:context": c.pop("kubernetes:context")}))
    assert [p for p, _ in err.problems] == ["kubernets:context", "kubernetes:context"]
    assert str(err).endswith("(the stack file sets `kubernets:context`, in a misspelled namespace: rename it "
                             "`kubernetes:context`)")

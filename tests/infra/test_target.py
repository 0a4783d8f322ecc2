"""Every stack names the cluster it deploys to (its target), and every Kubernetes resource goes
through that one provider."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
import pytest

from infra.errors import ConfigError
from tests.helpers import everything_on, refused, run_program, run_stack

PROVIDER = "pulumi:providers:kubernetes"
F = "Pulumi.cross-server.yaml"


def _refusal(edit) -> ConfigError:
    return refused("cross-server", edit)


def test_every_kubernetes_resource_uses_the_stacks_explicit_provider(stack):
    run = run_stack(stack, everything_on(stack))
    (provider,) = run.of_type(PROVIDER)
    assert provider.inputs["context"] == "dynamo-lab"
    kube = [r for r in run.resources if r.custom and r.type.startswith("kubernetes:")]
    assert {r.type for r in kube} >= {"kubernetes:core/v1:Namespace", "kubernetes:helm.sh/v3:Release",
                                      "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment",
                                      "kubernetes:batch/v1:Job", "kubernetes:core/v1:ConfigMap"}
    # A provider reference is "<provider urn>::<id>"; an empty one is the default provider.
    assert [r.name for r in kube if not r.provider.startswith(provider.urn + "::")] == []


def test_the_check_would_see_a_resource_on_the_default_provider():
    def program():
        explicit = k8s.Provider("cluster", context="dynamo-lab")
        k8s.core.v1.Namespace("on-explicit", opts=pulumi.ResourceOptions(provider=explicit))
        k8s.core.v1.Namespace("on-default")
        return {}
    run = run_program("same-server", program)
    (provider,) = run.of_type(PROVIDER)
    on = {r.name: r.provider.startswith(provider.urn + "::") for r in run.resources if r.type.startswith("kubernetes:")}
    assert on == {"on-explicit": True, "on-default": False}


def test_a_stack_without_a_context_is_refused_with_the_command():
    err = _refusal(lambda c: c.pop("kubernetes:context"))
    assert str(err) == (
        f"{F}: kubernetes:context: not set: without it this stack would deploy to whatever cluster your "
        "current kubectl context points at. Name the cluster it deploys to (`kubectl config get-contexts -o "
        "name` lists yours): pulumi config set kubernetes:context <context> --stack cross-server")


def test_an_empty_context_is_refused_like_a_missing_one():
    assert "kubernetes:context: not set" in str(_refusal(lambda c: c.update({"kubernetes:context": " "})))


def test_default_provider_keys_that_would_be_ignored_are_refused():
    err = _refusal(lambda c: c.update({"kubernetes:namespace": "team-a"}))
    assert (f"{F}: kubernetes:namespace: only Pulumi's default Kubernetes provider reads `kubernetes:namespace`"
            in str(err))
    assert "pulumi config rm kubernetes:namespace --stack cross-server" in str(err)
    assert "if that is what you meant" not in str(err)  # no key of ours is near `namespace`


def test_a_misspelled_cluster_key_is_named_with_the_key_it_was_meant_to_be():
    def edit(c):
        c["kubernetes:contxt"] = c.pop("kubernetes:context")
    err = str(_refusal(edit))
    assert ("kubernetes:contxt: only Pulumi's default Kubernetes provider reads `kubernetes:contxt`" in err
            and "pulumi config rm kubernetes:contxt --stack cross-server, and write its value as `kubernetes:context` "
                "if that is what you meant" in err)
    assert "kubernetes:context: not set" in err  # what the slip left unset is said too


@pytest.mark.parametrize("key", ["cluster", "target"])
def test_a_cluster_key_in_the_projects_namespace_is_refused(key):
    # `target` is what the schema calls the cluster the stack deploys to; Pulumi's keys fill it, never ours.
    err = _refusal(lambda c: c.update({key: {"context": "lab"}}))
    assert f"{F}: {key}: unknown key `dynamo-lab:{key}`: name the cluster with Pulumi's own key" in str(err)
    assert "did you mean" not in str(err)


def test_kubeconfig_contents_are_refused_a_path_is_passed_on():
    err = _refusal(lambda c: c.update({"kubernetes:kubeconfig": "apiVersion: v1\nkind: Config\n"}))
    assert f"{F}: kubernetes:kubeconfig: write the path of a kubeconfig file, not its contents" in str(err)
    run = run_stack("cross-server", lambda c: c.update({"kubernetes:kubeconfig": "/etc/lab/kubeconfig"}))
    (provider,) = run.of_type(PROVIDER)
    assert provider.inputs["kubeconfig"] == "/etc/lab/kubeconfig"
    assert run.outputs["cluster"] == "dynamo-lab"

"""The cluster a stack deploys to, from Pulumi's own `kubernetes:*` keys."""

from __future__ import annotations

from typing import Optional

from pydantic import Field, field_validator

from infra.config.base import Section


class ClusterTarget(Section):
    """The cluster a stack deploys to, from Pulumi's own keys `kubernetes:context` and
    `kubernetes:kubeconfig` (not `dynamo-lab:*`): every Kubernetes resource and the Helm release
    use one explicit provider built from them, never the default provider."""

    context: str = Field(min_length=1, description="the kubeconfig context of the cluster this stack deploys to",
                         json_schema_extra={"accepts": "a context name"})
    # A kubeconfig file; None: the usual lookup (KUBECONFIG, then ~/.kube/config).
    kubeconfig: Optional[str] = Field(None, description="the kubeconfig file to read it from; its contents are "
                                      "refused", json_schema_extra={
                                          "accepts": "a file path",
                                          "default_text": "the usual lookup (`KUBECONFIG`, then `~/.kube/config`)"})

    @field_validator("kubeconfig")
    @classmethod
    def _a_path(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and ("\n" in value or value.lstrip().startswith(("apiVersion", "{"))):
            raise ValueError("write the path of a kubeconfig file, not its contents (contents would sit in "
                             "the stack file in plain text), e.g. kubernetes:kubeconfig: ~/.kube/lab.yaml")
        return value

"""What the refusal tests of stack files share: the shipped file they edit, and edits of one group."""

from __future__ import annotations

from infra.errors import ConfigError
from tests.helpers import refused

F = "Pulumi.cross-server.yaml"


def refusal(edit) -> ConfigError:
    return refused("cross-server", edit)


def refused_text(edit, stack="cross-server", secret_keys=()) -> str:
    return str(refused(stack, edit, secret_keys))


def prefill(**keys):
    return lambda c: c["workers"][0].update(keys)


def decode(**keys):
    return lambda c: c["workers"][1].update(keys)

"""The project's one error hierarchy: every error a user can act on is a UserError.

The command line prints a UserError as its message and exits 2, with no traceback; under the
Pulumi CLI the program turns it into a `pulumi.RunError`, which stops preview/up before anything
is created. A ConfigError is the UserError of a stack file: it names the file and each key.
"""

from __future__ import annotations


class UserError(Exception):
    """Something the user can fix; its message says what and how."""


class ConfigError(UserError):
    """A stack file that cannot deploy. `problems` are (key path, message) pairs."""

    def __init__(self, stack_file: str, problems: list[tuple[str, str]]):
        self.stack_file = stack_file
        self.problems = problems
        super().__init__("\n".join(f"{stack_file}: {path}: {msg}" for path, msg in problems))


def stack_file(stack: str) -> str:
    """The file a stack's settings live in: Pulumi.<stack>.yaml."""
    return f"Pulumi.{stack}.yaml"

"""Stack configuration: the schema, one module per section (every default), and how single values
and engine flags are read. Loading a stack file (infra/load.py) and the cross-key checks
(infra/validate/) sit above the resolved stack and import this, never the reverse."""

from infra.config.schema import PROJECT, StackConfig

__all__ = ["PROJECT", "StackConfig"]

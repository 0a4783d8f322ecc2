"""Stack configuration: the models (every default), the loader and the cross-key checks."""

from infra.config.load import load
from infra.config.models import PROJECT, StackConfig

__all__ = ["PROJECT", "StackConfig", "load"]

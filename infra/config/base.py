"""What every section of the stack file's schema shares: the project's config namespace and the
model base (camelCase keys, unknown keys refused, frozen)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

PROJECT = "dynamo-lab"


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, frozen=True)

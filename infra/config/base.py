"""What every section of the stack file's schema shares: the project's config namespace and the
model base (camelCase keys, unknown keys refused, frozen, values of the wrong type refused)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

PROJECT = "dynamo-lab"


class Section(BaseModel):
    # strict: a value is taken as the type it was written as, never converted (pydantic's lax mode
    # takes `true` as the count 1, "3" and 2.0 as 3 and 2, "yes" as true). Pulumi hands a program
    # every structured setting as JSON text (infra/load.py, `_decode`), whose types are
    # exact, and its top-level scalars as text: those keys (`image`, `hfToken`, the cluster's) are
    # strings. An int is still a float (`efficiency: 1`), as JSON does not tell them apart; the
    # quantities (fields.py) read text and numbers as Kubernetes does, through their own parsers.
    # allow_inf_nan=False: no setting is infinite (`.inf`, `.nan`), and Pulumi could not hand one
    # over: Go's encoding/json refuses to write +Inf or NaN ("json: unsupported value").
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, frozen=True, strict=True,
                              allow_inf_nan=False)

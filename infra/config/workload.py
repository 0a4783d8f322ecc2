"""`workload`: the requests a variant is sized for."""

from __future__ import annotations

from typing import Optional

from pydantic import Field, model_validator

from infra.config.base import Section
from infra.config.fields import KeyProblem


class Workload(Section):
    """The requests a variant is sized for; the defaults are the lab's (docs/lab.md)."""

    # 2,371 input tokens on average: a shared prefix of 2,000 (one of `prefix_types` prefixes) and
    # 371 unique tokens.
    input_tokens: int = Field(2371, gt=0, description="average input tokens per request (the lab's)")
    prefix_tokens: int = Field(2000, ge=0, description="the shared prefix within them (the rest is unique per "
                               "request)", json_schema_extra={"accepts": ">= 0, less than `inputTokens`"})
    # Distinct shared prefixes the requests draw from: the more, the fewer prefix-cache hits. 24 is
    # the lab's hardest cell, so a stack is sized for its worst case.
    prefix_types: int = Field(24, gt=0, description="distinct prefixes the requests draw from; more means fewer "
                              "prefix-cache hits (24: the lab's hardest cell)")
    output_tokens: int = Field(64, gt=0, description="output tokens per request")
    concurrency: int = Field(8, gt=0, description="the concurrency the variant is sized for (the lab ran 4 and 8)")
    max_model_len: Optional[int] = Field(
        None, gt=0, description="every worker's `--max-model-len`; each worker's KV pool must hold one sequence "
        "this long plus vLLM's null block, or vLLM refuses to start (without the flag vLLM takes the model's "
        "40,960 tokens, 4.375 GiB of KV, more than any shipped pool)", json_schema_extra={
            "accepts": "at least `inputTokens` + `outputTokens`, at most the model's context",
            "default_text": "`inputTokens` + `outputTokens`, rounded up to a 16-token block "
                            "(`{derived.context}`)"})

    @model_validator(mode="after")
    def _prefix_within_input(self) -> "Workload":
        if self.prefix_tokens >= self.input_tokens:
            raise KeyProblem("prefixTokens",
                             f"prefixTokens {self.prefix_tokens} is not less than inputTokens {self.input_tokens}: "
                             "the shared prefix is part of each request's input, beside its unique tokens. Lower "
                             f"prefixTokens below {self.input_tokens}, or raise inputTokens")
        return self

    @property
    def unique_tokens(self) -> int:
        return self.input_tokens - self.prefix_tokens

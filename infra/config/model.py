"""`model`: the served model, its geometry (built in, or from its config.json) and its revision."""

from __future__ import annotations

import difflib
import re
from typing import Any, Literal, Optional

from pydantic import Field, field_validator, model_validator

from infra import units
from infra.catalogue import BUILTIN_MODELS, DEFAULT_MODEL
from infra.config.base import Section
from infra.config.fields import Bytes, KeyProblem

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "fp8": 1}


# A Hugging Face revision that cannot move: a full commit hash (a branch or tag name can).
COMMIT_HASH = r"^[0-9a-f]{40}$"


class Model(Section):
    name: str = Field(DEFAULT_MODEL, description="the served model; one that is not built in also needs `layers`, "
                      "`kvHeads`, `headDim` and `parameters`", json_schema_extra={"accepts": "a Hugging Face model id"})
    layers: Optional[int] = Field(None, gt=0, description="the model's layers (config.json `num_hidden_layers`)",
                                  json_schema_extra={"default_text": "(required)"})
    kv_heads: Optional[int] = Field(None, gt=0, description="its KV heads (config.json `num_key_value_heads`)",
                                    json_schema_extra={"default_text": "(required)"})
    head_dim: Optional[int] = Field(None, gt=0, description="its head dimension (config.json `head_dim`, not "
                                    "`hidden_size` / `num_attention_heads`)",
                                    json_schema_extra={"default_text": "(required)"})
    hidden_size: Optional[int] = Field(None, gt=0, description="its hidden size (config.json `hidden_size`): with "
                                       "`vocabSize`, the LM head's size; the local twin's model files carry it",
                                       json_schema_extra={"default_text": "`attentionHeads` x `headDim`"})
    attention_heads: Optional[int] = Field(None, gt=0, description="its attention heads (config.json "
                                           "`num_attention_heads`): `tensorParallel` above 1 must divide it, the "
                                           "predictor's attention cost reads it, the local twin's model files "
                                           "carry it", json_schema_extra={
                                               "default_text": "unset (required by `tensorParallel` above 1 and by "
                                                               "`predict` and `advise`; the twin takes `kvHeads`)"})
    vocab_size: Optional[int] = Field(None, gt=0, description="its vocabulary (config.json `vocab_size`): the "
                                      "embedding is looked up, not multiplied, and the LM head multiplies only "
                                      "each sequence's last token, so the prefill's FLOPs count neither per token",
                                      json_schema_extra={"default_text": "unset: every parameter counted per token "
                                                                         "(an overestimate of the math)"})
    tied_embeddings: bool = Field(False, description="whether the LM head is the embedding matrix (config.json "
                                  "`tie_word_embeddings`), so `parameters` holds it once")
    dtype: Literal["bfloat16", "float16", "float32", "fp8"] = Field(
        "bfloat16", description="the weights' and the KV cache's data type (the sizing's bytes per value)")
    parameters: Optional[int] = Field(None, gt=0, description="its parameter count",
                                      json_schema_extra={"default_text": "(required)"})
    checkpoint_parameters: Optional[int] = Field(
        None, gt=0, description="the parameters stored in the checkpoint files (tied weights may be stored twice); "
        "with `tokenizerBytes`, what the model takes on disk, which sizes the model cache",
        json_schema_extra={"default_text": "`parameters`"})
    tokenizer_bytes: Bytes = Field(units.parse_memory("64Mi"), description="the config and tokenizer files beside "
                                   "the weights (an ESTIMATE for models that are not built in); they size the model "
                                   "cache")
    max_position_embeddings: Optional[int] = Field(None, gt=0, description="the model's context (config.json "
                                                   "`max_position_embeddings`); a longer `workload.maxModelLen` or "
                                                   "`--max-model-len` is refused")
    revision: Optional[str] = Field(None, description="the Hub commit the pre-pull downloads and every worker loads "
                                    "(`--revision`); the built-in figures were read at this commit", json_schema_extra={
                                        "accepts": "a full 40-character commit hash (a branch or tag can move, and "
                                                   "is refused)", "default_text": "unset (the `main` branch)"})

    @field_validator("revision")
    @classmethod
    def _immutable_revision(cls, revision: Optional[str]) -> Optional[str]:
        if revision is not None and not re.fullmatch(COMMIT_HASH, revision):
            raise ValueError(
                f"{revision!r} is not a full commit hash; a branch or tag can move, and a moved one downloads "
                "other files into the shared cache than the sizing counted. Write the 40-character commit from "
                "the model's Hub page (Files and versions, History), e.g. "
                "c1899de289a04d12100db370d81485cdf75e47ca"
            )
        return revision

    @model_validator(mode="before")
    @classmethod
    def _fill_builtin(cls, data: Any) -> Any:
        # Before validation `name` is whatever the stack file holds: only a string can name a built-in
        # model (a map or list is unhashable, a `name in` of it a TypeError); the field then refuses
        # anything else as not text.
        if isinstance(data, dict):
            name = data.get("name", DEFAULT_MODEL)
            if isinstance(name, str) and name in BUILTIN_MODELS:
                return {**BUILTIN_MODELS[name], **data}
        return data

    @model_validator(mode="after")
    def _geometry_complete(self) -> "Model":
        needed = {"layers": self.layers, "kvHeads": self.kv_heads, "headDim": self.head_dim,
                  "parameters": self.parameters}
        missing = [k for k, v in needed.items() if v is None]
        if missing:
            # A built-in name in another letter case, or a character off: the Hub's repository ids are
            # what vLLM downloads and the frontend serves, so the spelling the catalogue has is the one
            # to write (infra/catalogue.py), never guessed here.
            near = [b for b in BUILTIN_MODELS if b.casefold() == self.name.casefold()] or difflib.get_close_matches(
                self.name, list(BUILTIN_MODELS), n=1, cutoff=0.85)
            if near:
                raise KeyProblem(
                    "name", f"model {self.name!r} is not built in, but {near[0]!r} is"
                    + (" (the letter case differs, and it counts: the name is the Hugging Face repository vLLM "
                       "downloads and the model the frontend serves)" if near[0].casefold() == self.name.casefold()
                       else "") + f". Write name: {near[0]}, or give this model's geometry: "
                    f"{', '.join(missing)} from its config.json and its parameter count")
            raise ValueError(
                f"model {self.name!r} is not built in ({', '.join(BUILTIN_MODELS)}), so its geometry "
                f"must be given: missing {', '.join(missing)} (copy num_hidden_layers, "
                "num_key_value_heads and head_dim from its config.json, and its parameter count)"
            )
        return self

    @model_validator(mode="after")
    def _head_within_parameters(self) -> "Model":
        if self.head_parameters and self.token_parameters <= 0:
            matrices = "its embedding" if self.tied_embeddings else "its embedding and LM head"
            raise ValueError(
                f"model {self.name!r}: {matrices} ({self.vocab_size:,} x {self.hidden_size:,} each) hold as many "
                f"parameters as the whole model ({self.parameters:,}), so no layer would be left. Check vocabSize, "
                "hiddenSize and parameters against its config.json, and tiedEmbeddings (tie_word_embeddings)")
        return self

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def token_parameters(self) -> int:
        """The parameters each token's forward multiplies through: all but the embedding (looked up)
        and the LM head (multiplied for each sequence's last token only, `head_parameters`); all of
        them where the vocabulary is not known."""
        if self.vocab_size is None or self.hidden_size is None:
            return self.parameters
        return self.parameters - self.head_parameters * (1 if self.tied_embeddings else 2)

    @property
    def head_parameters(self) -> int:
        """The LM head's parameters (vocabulary x hidden), multiplied once per sequence per step for
        its logits; 0 where the vocabulary is not known (token_parameters then counts it per token)."""
        if self.vocab_size is None or self.hidden_size is None:
            return 0
        return self.vocab_size * self.hidden_size

    @property
    def stored_parameters(self) -> int:
        """Parameters in the checkpoint files: what the weights take on disk, in `dtype`."""
        return self.checkpoint_parameters or self.parameters

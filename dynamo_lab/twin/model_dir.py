"""A small local model directory for the twin: the model's geometry and a tokenizer made here.

No download: `config.json` carries the served model's geometry (the mocker and the frontend read
it), and `tokenizer.json` is a byte-level BPE trained on the spot with the `tokenizers` package on
generated text (docs/sources.md, "The twin's parts"). AIPerf and the mocker both tokenize with it, so prompt
lengths agree between load generator and engine. Runs inside the twin environment.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB_SIZE = 4096


def _corpus(lines: int = 4000):
    rng = random.Random(2371)  # the same tokenizer every time
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "den", "tor", "pla", "gre", "sto", "qua",
                 "ex", "in", "ment", "tion", "er", "ly", "ing", "ed", "the", "and", "of", "to"]
    words = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 3))) for _ in range(3000)]
    for _ in range(lines):
        yield " ".join(rng.choice(words) for _ in range(rng.randint(8, 30))) + "."


def write(directory: Path, model: dict) -> Path:
    """model: name, layers, kv_heads, head_dim, hidden_size, attention_heads, dtype, max_len."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    directory.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_corpus(), trainer=trainer)
    tok.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": model["max_len"],
        "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
        "chat_template": CHAT_TEMPLATE,
    }, indent=2))
    (directory / "config.json").write_text(json.dumps({
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
        "_name_or_path": model["name"],
        "num_hidden_layers": model["layers"], "num_key_value_heads": model["kv_heads"],
        "head_dim": model["head_dim"], "hidden_size": model["hidden_size"],
        "num_attention_heads": model["attention_heads"], "torch_dtype": model["dtype"],
        "max_position_embeddings": model["max_len"], "vocab_size": tok.get_vocab_size(),
        "eos_token_id": tok.token_to_id("<|im_end|>"), "bos_token_id": tok.token_to_id("<|endoftext|>"),
    }, indent=2))
    return directory


if __name__ == "__main__":
    import sys

    print(write(Path(sys.argv[1]), json.loads(sys.argv[2])))

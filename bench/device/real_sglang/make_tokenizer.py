#!/usr/bin/env python3
"""Write the tiny models' tokenizer (no hub): a byte-level BPE of 2048 tokens trained on the repository's own
English text (README, docs, GSM8K test questions), with Qwen's chat markers as special tokens and a ChatML chat
template, so /v1/chat/completions and bench_serving's random dataset work with nothing downloaded.

    PYTHONPATH=<a site with tokenizers> python3.12 bench/device/real_sglang/make_tokenizer.py

Writes tokenizer.json and tokenizer_config.json into every model directory under models/. Deterministic for a
given tokenizers version and corpus."""

import glob
import json
import os

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def corpus():
    files = [os.path.join(REPO, "README.md")] + sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))
    for path in files:
        yield open(path, encoding="utf-8").read()
    for path in sorted(glob.glob(os.path.join(REPO, "data", "gsm8k", "*.jsonl"))):
        for line in open(path, encoding="utf-8"):
            yield json.loads(line).get("question", "")


def main():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2048, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 8192,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }
    for model_dir in sorted(glob.glob(os.path.join(HERE, "models", "*", "config.json"))):
        d = os.path.dirname(model_dir)
        tok.save(os.path.join(d, "tokenizer.json"))
        with open(os.path.join(d, "tokenizer_config.json"), "w") as fh:
            json.dump(config, fh, indent=1)
            fh.write("\n")
        print(d, tok.get_vocab_size(), [tok.token_to_id(s) for s in SPECIALS])


if __name__ == "__main__":
    main()

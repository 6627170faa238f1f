"""Write a tiny WordLevel tokenizer directory, offline (no hub), for benchmark clients.

usage: python make_tiny_tokenizer.py OUT_DIR   (needs `tokenizers` and `transformers`)

Vocabulary: <pad> <unk> <s> </s>, a few English words, the filler words w000..w399 that the
simulated SGLang server generates, a-z, 0-9 and punctuation.  Lowercase normalizer, WhitespaceSplit
pre-tokenizer, WordPiece decoder (joins tokens with spaces), so decode -> encode round-trips and
one word is one token.  tokenizer_config.json names PreTrainedTokenizerFast, which both
transformers 4.x (pinned by sglang 0.5.9) and 5.x load.
"""

from __future__ import annotations

import json
import string
import sys
from pathlib import Path

WORDS = ("the of and to in is was for on that with as by at it from his an were are which this be "
         "or has had not but first one their its new after who they have her she two been other when "
         "there all during into school time may years more most only over city some world would where "
         "later up such used many can state about national out known university united then made "
         "capital france what hello world").split()


def build(out: Path) -> Path:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab: dict[str, int] = {}
    for tok in ["<pad>", "<unk>", "<s>", "</s>"] + WORDS + [f"w{i:03d}" for i in range(400)] + \
            list(string.ascii_lowercase) + list(string.digits) + list(".,:;!?'\"-()"):
        vocab.setdefault(tok, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.normalizer = normalizers.Lowercase()
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tk.decoder = decoders.WordPiece(prefix="##")
    fast = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", pad_token="<pad>",
                                   bos_token="<s>", eos_token="</s>")
    fast.chat_template = ("{% for m in messages %}{{ m['content'] }} {% endfor %}"
                          "{% if add_generation_prompt %}the{% endif %}")
    out.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(out))
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg_path.write_text(json.dumps(cfg, indent=2))
    return out


if __name__ == "__main__":
    print(build(Path(sys.argv[1])))

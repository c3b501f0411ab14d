#!/usr/bin/env python3
"""Writes the benchmark's text and the tokenizer that encodes it.

    make_text.py OUT

OUT/text.txt: 10 MB (10,000,000 bytes of UTF-8) of local text, the same on
every machine with the same Debian packages: 6 MB of Debian changelogs
(English prose, names, versions, paths), 2 MB of Python's standard library
source (code), 2 MB of tests/tokenizers/make_corpus.py's lines (accents,
CJK, right-to-left scripts, emoji, numbers, odd spaces; seed 3).
OUT/tokenizer.json: a byte-level BPE in GPT-2's layout (32,000 tokens) that
Hugging Face tokenizers trains on the first half of the text's lines.
"""
import glob
import gzip
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "tokenizers"))
import make_corpus  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers  # noqa: E402

SIZE = 10_000_000


def first_bytes(texts, limit):
    out, size = [], 0
    for t in texts:
        out.append(t)
        size += len(t.encode("utf-8"))
        if size >= limit:
            break
    return "".join(out).encode("utf-8")[:limit].decode("utf-8", errors="ignore")


def changelogs():
    for path in sorted(glob.glob("/usr/share/doc/*/changelog*.gz")):
        try:
            with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
                yield f.read()
        except (OSError, UnicodeDecodeError):
            continue


def python_sources():
    for path in sorted(glob.glob("/usr/lib/python3*/*.py")):
        with open(path, encoding="utf-8", newline="") as f:
            yield f.read()


def corpus_lines():
    rng = random.Random(3)
    while True:
        yield make_corpus.line(rng, rng.choice(make_corpus.KINDS)) + "\n"


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    text = "\n".join([first_bytes(changelogs(), 6_000_000), first_bytes(python_sources(), 2_000_000),
                      first_bytes(corpus_lines(), 2_000_000)])
    text = text.encode("utf-8")[:SIZE].decode("utf-8", errors="ignore")
    with open(f"{out}/text.txt", "w", encoding="utf-8", newline="") as f:
        f.write(text)
    lines = text.split("\n")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(lines[:len(lines) // 2], trainers.BpeTrainer(
        vocab_size=32000, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.save(f"{out}/tokenizer.json")


if __name__ == "__main__":
    main()

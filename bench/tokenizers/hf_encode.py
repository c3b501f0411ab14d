#!/usr/bin/env python3
"""Hugging Face tokenizers' side of bench/tokenizers/run.sh, on one thread.

    hf_encode.py DIR REPEATS

Encodes DIR/text.txt with DIR/tokenizer.json, no special tokens: the whole
text in one call (encode), and its lines in one batch (encode_batch and
encode_batch_fast, which skips offsets), each the best of REPEATS. Prints
one line a way, "name seconds ids digest", the digest FNV-1a over the ids
as bench/tokenizers/encode.lua computes it.
"""
import os
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"  # before tokenizers starts its pool
os.environ["TOKENIZERS_PARALLELISM"] = "false"
from tokenizers import Tokenizer  # noqa: E402


def digest(ids):
    h = 0x811C9DC5
    for v in ids:
        h = ((h ^ (v & 0xFFFFFFFF)) * 0x01000193) & 0xFFFFFFFF
    return h


def main():
    folder, repeats = sys.argv[1], int(sys.argv[2])
    tok = Tokenizer.from_file(f"{folder}/tokenizer.json")
    with open(f"{folder}/text.txt", encoding="utf-8", newline="") as f:
        text = f.read()
    lines = text.split("\n")
    ways = [("encode", lambda: tok.encode(text, add_special_tokens=False).ids),
            ("encode_batch", lambda: [i for e in tok.encode_batch(lines, add_special_tokens=False) for i in e.ids]),
            ("encode_batch_fast",
             lambda: [i for e in tok.encode_batch_fast(lines, add_special_tokens=False) for i in e.ids])]
    for name, encode in ways:
        best, ids = float("inf"), None
        for _ in range(repeats):
            start = time.perf_counter()
            ids = encode()
            best = min(best, time.perf_counter() - start)
        print(name, f"{best:.4f}", len(ids), digest(ids))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Reads back what accel's save_pretrained wrote, with the reference libraries.

    check_saved.py REF SAVED CORPUS.json

For every tokenizer in SAVED/cases.txt (the cases parity.lua checked):
Hugging Face tokenizers (or, for the tokenizer.model, sentencepiece) loads
SAVED/<name> and gives the ids REF/<name> gives for every corpus text;
transformers' AutoTokenizer loads the folder and names the same special
tokens as its tokenizer_config.json.
"""
import json
import sys

import sentencepiece as spm
from tokenizers import Tokenizer
from transformers import AutoTokenizer

ref, saved, corpus_path = sys.argv[1:4]
with open(corpus_path, encoding="utf-8") as f:
    corpus = json.load(f)["texts"]
failures = 0
for name in open(f"{saved}/cases.txt").read().split():
    if name == "sentencepiece":
        a = spm.SentencePieceProcessor(model_file=f"{ref}/{name}/tokenizer.model")
        b = spm.SentencePieceProcessor(model_file=f"{saved}/{name}/tokenizer.model")
        same = all(a.encode(t) == b.encode(t) for t in corpus)
    else:
        a = Tokenizer.from_file(f"{ref}/{name}/tokenizer.json")
        b = Tokenizer.from_file(f"{saved}/{name}/tokenizer.json")
        for t in (a, b):
            t.no_padding()
            t.no_truncation()
        same = all(a.encode(t).ids == b.encode(t).ids for t in corpus)
        with open(f"{saved}/{name}/tokenizer_config.json") as f:
            config = json.load(f)
        auto = AutoTokenizer.from_pretrained(f"{saved}/{name}")
        for key in ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"):
            if key in config and str(getattr(auto, key)) != config[key]:
                print(f"FAILED: {name}: transformers reads {key} {getattr(auto, key)!r}, the config says {config[key]!r}")
                failures += 1
    if not same:
        print(f"FAILED: {name}: the saved tokenizer gives other ids than the original")
        failures += 1
    else:
        print(f"ok: {name}: the saved folder reads back with the same ids")
sys.exit(1 if failures else 0)

#!/usr/bin/env python3
"""Writes the seed corpora of the tokenizer fuzz targets (tests/fuzz/fuzz_tokenizer_*.cpp).

    make_fuzz_seeds.py [FUZZ_CORPUS]     (default: tests/fuzz/corpus)

Run with the oracle environment (tests/models/transformers_venv.sh); the
seeds are committed. tokenizer_json/ gets tiny tokenizer.json files that
Hugging Face tokenizers wrote, one per layout of make_tokenizers.py (so
every normalizer, pre-tokenizer, model, post-processor and decoder type
accel reads is in some seed); tokenizer_encode/ gets make_corpus.py's
texts, each after the byte that picks a fixture tokenizer and options.
Files are named by their SHA-1, as libFuzzer names what it adds.
"""
import hashlib
import json
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_corpus  # noqa: E402
import make_tokenizers  # noqa: E402


def write(folder, data):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)


def main():
    corpus = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz", "corpus")
    rng = random.Random(11)
    texts = [make_corpus.line(rng, rng.choice(make_corpus.KINDS)) for _ in range(150)]
    with tempfile.TemporaryDirectory() as out:
        # Tiny vocabularies keep the seeds small.
        make_tokenizers.byte_level_family(texts, out, vocab_size=300)
        make_tokenizers.component_variants(texts, out, vocab_size=120)
        make_tokenizers.byte_fallback_family(texts, out, vocab_size=300)
        for name in ("gpt2", "llama3", "qwen2", "smollm", "parts_a", "parts_b", "suffix_bpe", "llama2", "mistral"):
            with open(f"{out}/{name}/tokenizer.json", encoding="utf-8") as f:
                data = json.load(f)
            write(f"{corpus}/tokenizer_json", json.dumps(data, ensure_ascii=False).encode("utf-8"))
    fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
    with open(f"{fixtures}/wordpiece/tokenizer.json", encoding="utf-8") as f:
        write(f"{corpus}/tokenizer_json", json.dumps(json.load(f), ensure_ascii=False).encode("utf-8"))
    for i, text in enumerate(make_corpus.FIXED + texts[:60]):
        write(f"{corpus}/tokenizer_encode", bytes([i % 48]) + text.encode("utf-8"))


if __name__ == "__main__":
    main()

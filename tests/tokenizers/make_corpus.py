#!/usr/bin/env python3
"""Writes the parity corpus: texts that exercise what tokenizers get wrong.

    make_corpus.py OUT.json [--lines N] [--seed S]

OUT.json is {"texts": [...]} (a text may hold newlines). The lines
mix ASCII prose, accents precomposed and decomposed, stacked combining
marks, CJK, Hangul, right-to-left scripts, emoji with joiners, skin tones,
flags and keycaps, runs of spaces, tabs and newlines (and Unicode's other
spaces), numbers in several scripts, code, control characters, and the
special tokens of every tokenizer under test written inside the text, whole
and broken. Deterministic for a seed; no network, no data files.
"""
import argparse
import json
import random
import unicodedata

WORDS = ("the of and to in is you that it he was for on are as with his they at be this have from or one had by "
         "word but not what all were we when your can said there use an each which she do how their if will up "
         "other about out many then them these so some her would make like him into time has look two more write "
         "go see number no way could people my than first water been call who oil its now find long down day did "
         "get come made may part tokenizer accelerate gradient transformer don't won't it's I'm they've we're "
         "you'll she'd isn't").split()
ACCENTED = ("café naïve résumé façade coöperate Zürich Ångström São Paulo Ærøskøbing señor mañana jalapeño über "
            "straße Mädchen Øresund déjà vu Tiếng Việt Hà Nội Đà Nẵng crème brûlée Čeština Łódź Ελληνικά "
            "Русский язык Українська İstanbul ıi ǅemal ﬁnance Ⅻ ΣΑΣ ὈΔΥΣΣΕΎΣ").split()
CJK = ["东京是日本的首都。", "我爱自然语言处理", "今日はいい天気ですね。", "カタカナとひらがな", "漢字仮名交じり文",
       "한국어 문장입니다.", "서울특별시", "中文，标点！符号？", "（全角括弧）「引用」『二重』", "𠀀𠀁𪚥𡈽 extension B",
       "ｆｕｌｌｗｉｄｔｈ　ＡＢＣ　１２３", "ﾊﾝｶｸ ｶﾀｶﾅ"]
RTL = ["مرحبا بالعالم", "اللُّغَةُ العَرَبِيَّة", "שָׁלוֹם עוֹלָם", "עברית 123 English", "سلام ۱۲۳۴ دنیا",
       "پاکستان زندہ باد", "ܫܠܡܐ", "ދިވެހި", "(مرحبا) [عالم] {123}", "\u202bembedded\u202c \u200fRLM\u200e"]
EMOJI = ["👨‍👩‍👧‍👦", "👩🏽‍💻", "🏳️‍🌈", "❤️", "🇯🇵🇫🇷", "1️⃣#️⃣", "🤷‍♀️", "🙂🙃😀", "🫠🥲", "👍🏿", "🧑‍🤝‍🧑",
         "⚡️🔥💯", "🐈‍⬛", "🏴󠁧󠁢󠁳󠁣󠁴󠁿"]
SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2009", "\u2028",
          "\u200b", "\u000b", "\u000c", "\u0085", "    \t  \n"]
SPECIALS = ["<|endoftext|>", "<s>", "</s>", "<unk>", "[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]", "<mask>",
            "<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>", "accelerate"]
BROKEN_SPECIALS = ["<|endof", "< s>", "[CLS", "<|im_start", "</ s>", "<<s>>", "[[MASK]]", "<|endoftext|><|endoftext|>",
                   "<s></s>", "x<mask>y", "accelerated", "Accelerate"]
CODE = [
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "const add = (a, b) => a + b;\n\tconsole.log(`sum: ${add(1, 2)}`);",
    "if x != None and y >= 3:\n        print(f\"{x!r:>10}\")",
    "SELECT name, COUNT(*) FROM users WHERE id IN (1, 2, 3) GROUP BY name;",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }",
    "x = {'a': [1, 2.5, -3e-4], \"b\": None}",
    "<div class=\"row\"><span>&nbsp;&amp;</span></div>",
    "$ ls -la | grep '.py' && echo \"done\" > /dev/null 2>&1",
    "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
    "    \t# indented comment   \n\n\n    pass",
    "a=b+c*d/e%f^g|h&i~j", "i++; j--; k += 1; l -= 2; m **= 3; n //= 4",
    "https://example.com/path?q=1&r=two#frag", "user@example.org", "C:\\Users\\name\\file.txt",
]
NUMBERS = ["0", "7", "42", "123", "1234", "12345", "1234567890123", "3.14159", "-0.5", "1,234,567", "1e-10",
           "2024-11-27", "12:34:56", "+1 (555) 123-4567", "٠١٢٣٤٥٦٧٨٩", "१२३", "²³¹", "½ ¾ ⅞", "Ⅳ Ⅸ", "①②③",
           "１２３４", "0x1F600", "100%", "$9.99", "€10,50", "5'11\""]
CONTROL = ["\x00", "\x07", "\x1b[31m", "\x7f", "\ufffd", "\ufeff", "\u00ad", "\u200c", "\u200d", "\u2060",
           "\U000e0001", "\ue000", "\ud7ff"]
COMBINING = ["e\u0301", "a\u0308\u0304", "Z\u0351\u0324\u0339\u035a\u0353", "n\u0303", "\u0915\u093f",
             "\u0e01\u0e34\u0e48", "\u1100\u1161\u11a8", "\u05e9\u05c1\u05b8", "o\u0328\u0304", "q\u0307\u0323",
             "\u0300starts with a mark", "i\u0307"]


def sentence(rng, pool, n):
    return " ".join(rng.choice(pool) for _ in range(n))


def line(rng, kind):
    if kind == "ascii":
        s = sentence(rng, WORDS, rng.randint(3, 18))
        s = s[0].upper() + s[1:]
        return s + rng.choice([".", "!", "?", ",", "...", ";", ":", " -", ""])
    if kind == "accents":
        words = [rng.choice(ACCENTED) for _ in range(rng.randint(2, 8))]
        text = " ".join(words)
        return unicodedata.normalize(rng.choice(["NFC", "NFD", "NFC"]), text)
    if kind == "combining":
        return "".join(rng.choice(COMBINING) + rng.choice(["", " ", "x"]) for _ in range(rng.randint(2, 6)))
    if kind == "cjk":
        return rng.choice(CJK) + rng.choice(["", " ", "abc", "。", "2024年"]) + rng.choice(CJK)
    if kind == "rtl":
        return rng.choice(RTL) + rng.choice([" ", " - ", ": "]) + rng.choice(RTL + WORDS)
    if kind == "emoji":
        return "".join(rng.choice(EMOJI + [" ", "ok", "!"]) for _ in range(rng.randint(1, 6)))
    if kind == "spaces":
        parts = []
        for _ in range(rng.randint(2, 7)):
            parts.append(rng.choice(WORDS + ACCENTED[:4] + [""]))
            parts.append(rng.choice(SPACES))
        return "".join(parts)
    if kind == "numbers":
        return " ".join(rng.choice(NUMBERS + WORDS[:20]) for _ in range(rng.randint(1, 8)))
    if kind == "code":
        return rng.choice(CODE)
    if kind == "specials":
        parts = []
        for _ in range(rng.randint(1, 6)):
            parts.append(rng.choice(SPECIALS + BROKEN_SPECIALS))
            parts.append(rng.choice(["", " ", "  ", "\n", "hello", " world ", "é", "東京", "123"]))
        return "".join(parts)
    if kind == "control":
        return rng.choice(WORDS) + rng.choice(CONTROL) + rng.choice(WORDS) + rng.choice(["", rng.choice(CONTROL)])
    if kind == "mixed":
        pools = [WORDS, ACCENTED, CJK, RTL, EMOJI, NUMBERS, SPECIALS, SPACES]
        return "".join(rng.choice(rng.choice(pools)) + rng.choice(["", " "]) for _ in range(rng.randint(3, 10)))
    raise ValueError(kind)


KINDS = ["ascii"] * 5 + ["accents", "combining", "cjk", "rtl", "emoji", "spaces", "spaces", "numbers", "code",
                         "specials", "specials", "control", "mixed", "mixed"]

# Texts every corpus holds, whatever the seed: edges of every stage.
FIXED = ["", " ", "  ", "\n", "\t", "a", "A", "é", "e\u0301", "東", "🙂", " hello", "hello ", "  hello  world  ",
         "x" * 150, "supercalifragilisticexpialidocious" * 4, "ab" * 300, "1" * 40, "a\u0301" * 50,
         "Hello, World!", "don't stop", "I'M SHOUTING", "ǅ ǈ ǋ", "ΣΑΣ σας", "İİ ıı", "ß ẞ", "ﬁﬂ",
         "<s>", "</s>", "<s> </s>", "<|endoftext|>", "[CLS] [SEP]", "[MASK]", " [MASK] ", "accelerate",
         "<mask>", "  <mask>  ", "x <mask> y", "accelerate accelerated", "word accelerate,word",
         "\u200b", "\ufeffBOM", "\u0000", "\ufffd", "tab\tand\nnewline\r\nand\u2028line",
         "   \n\n\t  ", "\U0001F468\u200d\U0001F469\u200d\U0001F467", "a\u0085b", "a\u180eb", "a\u2e43b",
         "\U00031350\U0001E4D0\U00011F04", "\u32ff\ua7f2\U00011938", "\U00010781",
         "a_b c-d e.f g'h", "x" + "\u0301" * 30, "\u0300" * 3, "¿Qué? ¡Sí!", "«quotes» “curly” ‘single’",
         "—dashes– and hyphens-", "…ellipsis", "© ® ™ ° ± × ÷", "\u3000\u3000全角", "    indented",
         "trailing    ", "\n\nleading newlines", "a\n\nb\n\n\nc"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--lines", type=int, default=2200)
    parser.add_argument("--seed", type=int, default=36)
    a = parser.parse_args()
    rng = random.Random(a.seed)
    texts = list(FIXED)
    while len(texts) < a.lines:
        texts.append(line(rng, rng.choice(KINDS)))
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump({"texts": texts}, f, ensure_ascii=False)


if __name__ == "__main__":
    main()

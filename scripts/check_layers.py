#!/usr/bin/env python3
"""Checks the include rule between the layers (docs/architecture.md,
"Layers") and exits 1 naming every crossing. Each library of the build is a
layer, its sources a folder:

    layer         library               folder                     includes
    utf8          accel_utf8            engine/utf8/               itself
    files         accel_files           engine/files/              itself
    json          accel_json            engine/json/               utf8
    protocol      accel_protocol        engine/protocol/           utf8
    launch        accel_launch,         engine/launch/             protocol, json, utf8
                  accel-run (its main)
    tokenizers    accel_tokenizers      engine/tokenizers/         sentencepiece (its module's header), json, utf8, files
    sentencepiece accel_sentencepiece   engine/tokenizers/sentencepiece_module/  itself
    chat_template accel_chat_template   engine/chat_template/      utf8
    engine        accel_engine          engine/ (the rest)         protocol, json, utf8, files
    bindings      accel_worker          bindings/                  engine, tokenizers, chat_template, protocol, json, utf8, files

No layer but engine and bindings may include LibTorch. Every library the
top-level CMakeLists.txt builds must be in the table above (a new library
is a new layer, with its rule written here); tests, benchmarks and the fuzz
harnesses may include anything.

    scripts/check_layers.py [--root DIR]
"""
import argparse
import os
import re
import sys

# layer -> (its libraries, the layers it may include besides itself, whether it may include LibTorch)
LAYERS = {
    "utf8": (("accel_utf8",), (), False),
    "files": (("accel_files",), (), False),
    "json": (("accel_json",), ("utf8",), False),
    "protocol": (("accel_protocol",), ("utf8",), False),
    "launch": (("accel_launch", "accel-run"), ("protocol", "json", "utf8"), False),
    "tokenizers": (("accel_tokenizers",), ("sentencepiece", "json", "utf8", "files"), False),
    "sentencepiece": (("accel_sentencepiece",), (), False),
    "chat_template": (("accel_chat_template",), ("utf8",), False),
    "engine": (("accel_engine",), ("protocol", "json", "utf8", "files"), True),
    "bindings": (("accel_worker",), ("engine", "tokenizers", "chat_template", "protocol", "json", "utf8", "files"), True),
}
# Targets of the build that are no layer of ours: found dependencies (LuaJIT,
# PCRE2, SentencePiece located by their files) wrapped as interface targets.
DEPENDENCY_TARGETS = re.compile(r"^(accel_luajit|accel_found_\w*)$")

LIBTORCH = re.compile(r"#\s*include\s*<(ATen|c10|torch|caffe2)/")
PROJECT = re.compile(r'#\s*include\s*"((?:engine|bindings)/[^"]+)"')
TARGET = re.compile(r"^\s*add_(?:library|executable)\(\s*([\w.+-]+)", re.MULTILINE)


def layer(path):
    """The layer of a source file, by its folder; None for files the rule leaves alone."""
    parts = path.split("/")
    if parts[0] == "bindings":
        return "bindings"
    if parts[0] != "engine":
        return None
    if len(parts) > 3 and parts[1] == "tokenizers" and parts[2] == "sentencepiece_module":
        return "sentencepiece"
    if len(parts) > 2 and parts[1] in ("utf8", "files", "json", "protocol", "launch", "tokenizers", "chat_template"):
        return parts[1]
    return "engine"


def allowed(source_layer, included):
    target = layer(included)
    return target == source_layer or target in LAYERS[source_layer][1]


def crossings(root):
    found = []
    for top in ("engine", "bindings"):
        for folder, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith((".h", ".cpp")):
                    continue
                path = os.path.relpath(os.path.join(folder, name), root)
                source_layer = layer(path)
                with open(os.path.join(root, path), encoding="utf-8") as f:
                    for number, line in enumerate(f, 1):
                        if not LAYERS[source_layer][2] and LIBTORCH.match(line.strip()):
                            found.append(f"{path}:{number}: {source_layer}/ may not include LibTorch: {line.strip()}")
                        m = PROJECT.match(line.strip())
                        if m and not allowed(source_layer, m.group(1)):
                            found.append(f"{path}:{number}: {source_layer}/ may not include "
                                         f"{layer(m.group(1))}/: {m.group(1)}")
    return found


def unnamed_libraries(root):
    """The targets the top-level CMakeLists.txt builds that no layer names."""
    cmake = os.path.join(root, "CMakeLists.txt")
    if not os.path.exists(cmake):
        return []
    with open(cmake, encoding="utf-8") as f:
        targets = TARGET.findall(f.read())
    named = {library for libraries, _, _ in LAYERS.values() for library in libraries}
    return [f"CMakeLists.txt: the library {t} is in no layer of scripts/check_layers.py"
            for t in targets if t not in named and not DEPENDENCY_TARGETS.match(t)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = parser.parse_args()
    found = crossings(args.root)
    unnamed = unnamed_libraries(args.root)
    for line in found + unnamed:
        print(line)
    if unnamed:
        print(f"check_layers: {len(unnamed)} librar{'y' if len(unnamed) == 1 else 'ies'} of the build in no layer")
    if found:
        print(f"check_layers: {len(found)} include(s) cross the layers (docs/architecture.md, \"Layers\")")
    if found or unnamed:
        sys.exit(1)
    print("check_layers: every include keeps to its layer; every library of the build is a layer")


if __name__ == "__main__":
    main()

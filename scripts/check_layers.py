#!/usr/bin/env python3
"""Checks the include rule between the layers (docs/architecture.md,
"Layers") and exits 1 naming every crossing:

    engine/protocol/   includes only engine/protocol/; no LibTorch
    engine/launch/     includes engine/protocol/ and itself; no LibTorch
    engine/chat_template/  includes itself and engine/tokenizers/; no LibTorch
    engine/ (the rest) includes engine/ but not engine/launch/
    bindings/          includes bindings/ and engine/ but not engine/launch/

Tests, benchmarks and the fuzz harnesses may include anything.

    scripts/check_layers.py [--root DIR]
"""
import argparse
import os
import re
import sys

LIBTORCH = re.compile(r"#\s*include\s*<(ATen|c10|torch|caffe2)/")
PROJECT = re.compile(r'#\s*include\s*"((?:engine|bindings)/[^"]+)"')


def layer(path):
    """The layer of a source file, by its folder; None for files the rule leaves alone."""
    parts = path.split("/")
    if parts[0] == "bindings":
        return "bindings"
    if parts[0] != "engine":
        return None
    if len(parts) > 2 and parts[1] in ("protocol", "launch", "chat_template"):
        return parts[1]
    return "engine"


def allowed(source_layer, included):
    target = layer(included)
    if source_layer == "protocol":
        return target == "protocol"
    if source_layer == "launch":
        return target in ("protocol", "launch")
    if source_layer == "chat_template":
        return target == "chat_template" or included.startswith("engine/tokenizers/")
    if source_layer == "engine":
        return target in ("protocol", "engine", "chat_template")
    return target in ("protocol", "engine", "chat_template", "bindings")  # bindings


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
                        if source_layer in ("protocol", "launch", "chat_template") and LIBTORCH.match(line.strip()):
                            found.append(f"{path}:{number}: {source_layer}/ may not include LibTorch: {line.strip()}")
                        m = PROJECT.match(line.strip())
                        if m and not allowed(source_layer, m.group(1)):
                            found.append(f"{path}:{number}: {source_layer}/ may not include "
                                         f"{layer(m.group(1))}/: {m.group(1)}")
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = parser.parse_args()
    found = crossings(args.root)
    for line in found:
        print(line)
    if found:
        print(f"check_layers: {len(found)} include(s) cross the layers (docs/architecture.md, \"Layers\")")
        sys.exit(1)
    print("check_layers: every include keeps to its layer")


if __name__ == "__main__":
    main()

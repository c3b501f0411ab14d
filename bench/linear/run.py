#!/usr/bin/env python3
"""CPU float32 linear layers, y = x W^T, in one invocation: accel's F.linear
(oneDNN's sgemm, engine/nn/linear.h), LibTorch's own product in the same
accel process (x:matmul(W:t()): OpenBLAS under Debian's LibTorch), and
Python PyTorch's F.linear (PyPI's torch 2.x: MKL), on the same threads, for
the shapes of a 125M Llama's projections at 1, 8 and 1024 rows.
    bench/linear/run.py [--threads 2] [--build build] [--python PY]
Prints a markdown table of median milliseconds and the speed ratios.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

TORCH_SIDE = r"""
import json, sys, time, torch
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import results  # noqa: E402  (bench/results.py: the RESULTS.md it writes)
torch.set_num_threads(int(sys.argv[1]))
shapes = json.load(open(sys.argv[2]))["shapes"]
def median_ms(fn, calls):
    fn(); fn()
    ts = []
    for _ in range(calls):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    ts.sort()
    return ts[calls // 2] * 1000
out = []
with torch.no_grad():
    for s in shapes:
        x, w = torch.randn(s["rows"], s["inputs"]), torch.randn(s["outputs"], s["inputs"])
        out.append({"torch_ms": median_ms(lambda: torch.nn.functional.linear(x, w), s["calls"]),
                    "torch_version": torch.__version__})
json.dump(out, open(sys.argv[3], "w"))
"""


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    default_python = os.path.join(os.environ.get("ACCEL_ORACLE_VENV", os.path.expanduser(
        "~/.cache/accel/transformers-venv")), "bin", "python")
    p.add_argument("--python", default=default_python)
    a = p.parse_args()
    shapes = []
    for rows in (1, 8, 1024):
        for outputs, inputs in ((768, 768), (2048, 768), (768, 2048), (32000, 768)):
            calls = 200 if rows == 1 else 100 if rows == 8 else 10
            shapes.append({"rows": rows, "outputs": outputs, "inputs": inputs, "calls": calls})
    with tempfile.TemporaryDirectory() as tmp:
        shapes_path = os.path.join(tmp, "shapes.json")
        json.dump({"shapes": shapes}, open(shapes_path, "w"))
        accel_out, torch_out = os.path.join(tmp, "accel.json"), os.path.join(tmp, "torch.json")
        subprocess.run([os.path.join(a.build, "accel-run"), os.path.join(HERE, "accel_side.lua"),
                        "--threads", str(a.threads), "--", shapes_path, accel_out], check=True)
        subprocess.run([a.python, "-c", TORCH_SIDE, str(a.threads), shapes_path, torch_out], check=True)
        ours, theirs = json.load(open(accel_out)), json.load(open(torch_out))
    print(f"{a.threads} threads; Python PyTorch {theirs[0]['torch_version']}; median ms per product\n")
    print("| rows | W (out x in) | accel F.linear (oneDNN) | LibTorch matmul (OpenBLAS) | PyTorch F.linear (MKL) "
          "| oneDNN speed vs OpenBLAS | vs MKL | max difference |")
    print("|---|---|---|---|---|---|---|---|")
    for o, t in zip(ours, theirs):
        print(f"| {o['rows']} | {o['outputs']} x {o['inputs']} | {o['onednn_ms']:.3f} | {o['libtorch_ms']:.3f} "
              f"| {t['torch_ms']:.3f} | {o['libtorch_ms'] / o['onednn_ms']:.2f} | {t['torch_ms'] / o['onednn_ms']:.2f} "
              f"| {o['max_difference']:.1e} |")


if __name__ == "__main__":
    with results.published("bench/linear", "CPU matrix products through oneDNN"):
        status = main()
    sys.exit(status)

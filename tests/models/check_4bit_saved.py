"""transformers + bitsandbytes load the 4-bit folders accel saved
(four_bit_parity.lua) and give the logits accel gave.

Usage: check_4bit_saved.py OUT_DIR   (make_4bit_reference.py's folder)
For each type: OUT_DIR/accel_<type>/ loads with AutoModelForCausalLM, and its
logits of reference.safetensors' input_ids equal accel's
(OUT_DIR/accel_logits.safetensors "<type>|logits") within 1e-5.
"""
import os
import sys

os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
import torch  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

torch.set_num_threads(2)
out_dir = sys.argv[1]
ref = load_file(os.path.join(out_dir, "reference.safetensors"))
accel = load_file(os.path.join(out_dir, "accel_logits.safetensors"))
failed = False
for quant_type in ("nf4", "fp4"):
    model = AutoModelForCausalLM.from_pretrained(os.path.join(out_dir, f"accel_{quant_type}"), device_map="cpu")
    model.train()  # no repacking (make_4bit_reference.py says why); no dropout in a Llama
    kinds = {type(m).__name__ for m in model.modules()}
    if "Linear4bit" not in kinds:
        print(f"FAIL {quant_type}: transformers did not load 4-bit layers ({sorted(kinds)})")
        failed = True
        continue
    with torch.no_grad():
        logits = model(input_ids=ref["input_ids"]).logits.float()
    d = (logits - accel[f"{quant_type}|logits"]).abs().max().item()
    print(f"{quant_type}: transformers' logits of accel's 4-bit folder differ from accel's by {d:.2e}")
    failed = failed or not d <= 1e-5
sys.exit(1 if failed else 0)

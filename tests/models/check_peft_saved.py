"""Loads what accel.peft saved with PEFT and transformers themselves and
checks it computes what PEFT computed (make_peft_reference.py's cases).

Usage: check_peft_saved.py REF_DIR SAVED_DIR

REF_DIR is make_peft_reference.py's folder; for every case it lists,
SAVED_DIR/CASE is what peft_parity.lua wrote for it (one process for all
cases: importing torch, transformers and PEFT is most of the time):
  accel_adapter/  accel's save_pretrained of the trained adapter: PEFT's
                  PeftModel.from_pretrained loads it onto CASE_DIR/base,
                  every tensor PEFT's own trained adapter has and no other
                  (PEFT would only warn), its adapter_config.json reads as
                  PEFT's own with the same settings, and the logits equal
                  logits_trained within 1e-5 (max abs diff)
  merged/         save_pretrained of accel's merge_and_unload: transformers
                  loads it with no weight missing, unexpected or misshapen,
                  and its logits equal logits_merged within 1e-5
Prints a line per case; exits 0 when all holds, 1 with the reason otherwise.
"""
import json
import os
import sys

import peft
import torch
import transformers
from safetensors.torch import load_file

TOLERANCE = 1e-5
SETTINGS = ("peft_type", "task_type", "r", "lora_alpha", "lora_dropout", "target_modules", "bias",
            "modules_to_save", "use_rslora", "init_lora_weights", "fan_in_fan_out", "use_dora")

torch.set_num_threads(2)
transformers.utils.logging.disable_progress_bar()
transformers.utils.logging.set_verbosity_error()


def fail(message):
    print(f"FAILED: {message}")
    sys.exit(1)


def base_model(case_dir):
    return transformers.AutoModelForCausalLM.from_pretrained(
        os.path.join(case_dir, "base"), dtype=torch.float32, attn_implementation="eager")


def compare(what, got, want):
    diff = (got.float() - want).abs().max().item()
    print(f"  {what}: max abs diff {diff:.3e} (tolerance {TOLERANCE:g})")
    if not diff <= TOLERANCE:  # also catches NaN
        fail(f"{what} differ from PEFT's by {diff:.3e} > {TOLERANCE:g}")


def settings(folder):
    config = peft.PeftConfig.from_pretrained(folder).to_dict()
    out = {key: config.get(key) for key in SETTINGS}
    for key in ("target_modules", "modules_to_save"):
        if isinstance(out[key], (list, set)):
            out[key] = sorted(out[key])
    return out


def check_case(case_dir, saved_dir):
    reference = load_file(os.path.join(case_dir, "reference.safetensors"))
    inputs = {"input_ids": reference["input_ids"], "attention_mask": reference["attention_mask"]}

    adapter = os.path.join(saved_dir, "accel_adapter")
    theirs = os.path.join(case_dir, "trained_adapter")
    ours_keys = set(load_file(os.path.join(adapter, "adapter_model.safetensors")))
    theirs_keys = set(load_file(os.path.join(theirs, "adapter_model.safetensors")))
    if ours_keys != theirs_keys:
        fail(f"accel's adapter has {sorted(ours_keys - theirs_keys)} beyond PEFT's and lacks "
             f"{sorted(theirs_keys - ours_keys)}")
    ours_settings, theirs_settings = settings(adapter), settings(theirs)
    if ours_settings != theirs_settings:
        fail(f"accel's adapter_config.json reads as {json.dumps(ours_settings)}, PEFT's own as "
             f"{json.dumps(theirs_settings)}")
    try:
        model = peft.PeftModel.from_pretrained(base_model(case_dir), adapter)
    except Exception as error:  # noqa: BLE001 - any load error is the finding
        fail(f"PEFT cannot load {adapter}: {type(error).__name__}: {error}")
    model.eval()
    with torch.no_grad():
        compare("logits of accel's adapter in PEFT", model(**inputs).logits, reference["logits_trained"])

    merged_dir = os.path.join(saved_dir, "merged")
    merged, info = transformers.AutoModelForCausalLM.from_pretrained(
        merged_dir, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        if info.get(kind):
            fail(f"{kind.replace('_', ' ')} loading {merged_dir}: {sorted(map(str, info[kind]))}")
    merged.eval()
    with torch.no_grad():
        compare("logits of accel's merged model in transformers", merged(**inputs).logits,
                reference["logits_merged"])
    print("ok: PEFT and transformers compute PEFT's results from", saved_dir)


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: check_peft_saved.py REF_DIR SAVED_DIR")
    ref_dir, saved_dir = sys.argv[1], sys.argv[2]
    with open(os.path.join(ref_dir, "cases.txt")) as f:
        for case in f.read().split():
            check_case(os.path.join(ref_dir, case), os.path.join(saved_dir, case))


if __name__ == "__main__":
    main()

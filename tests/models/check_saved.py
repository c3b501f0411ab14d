"""Loads a checkpoint folder that accel's save_pretrained wrote with
transformers itself and checks it computes what the case's reference says.

Usage: check_saved.py CASE_DIR SAVED_DIR

CASE_DIR is a case folder of make_checkpoints.py (its reference.safetensors
is read); SAVED_DIR is loaded with AutoModelForCausalLM, or AutoModel where
its config.json's model_type is bert, in float32 with eager attention. Every
weight must load (none missing, unexpected or of another shape), and the
logits (last_hidden_state for bert) on the reference input_ids and
attention_mask, and the single sequence's logits where the case has one,
must equal the reference within 1e-4 (max abs diff). Exit 0 when they do,
1 with the reason otherwise.
"""
import json
import os
import sys

import torch
import transformers
from safetensors.torch import load_file

TOLERANCE = 1e-4
ENCODERS = {"bert"}

torch.set_num_threads(2)
transformers.utils.logging.disable_progress_bar()
transformers.utils.logging.set_verbosity_error()


def fail(message):
    print(f"FAILED: {message}")
    sys.exit(1)


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: check_saved.py CASE_DIR SAVED_DIR")
    case_dir, saved_dir = sys.argv[1], sys.argv[2]
    reference = load_file(os.path.join(case_dir, "reference.safetensors"))
    config_path = os.path.join(saved_dir, "config.json")
    if not os.path.isfile(config_path):
        fail(f"{saved_dir} has no config.json")
    with open(config_path) as f:
        model_type = json.load(f).get("model_type")
    auto = transformers.AutoModel if model_type in ENCODERS else transformers.AutoModelForCausalLM
    try:
        model, info = auto.from_pretrained(
            saved_dir, dtype=torch.float32, attn_implementation="eager",
            output_loading_info=True)
    except Exception as error:  # noqa: BLE001 - any load error is the finding
        fail(f"transformers cannot load {saved_dir}: {type(error).__name__}: {error}")
    model.eval()
    print(f"{saved_dir}: {model_type}, loaded as {type(model).__name__}"
          f" (transformers {transformers.__version__})")
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        found = info.get(kind)
        if found:
            fail(f"{kind.replace('_', ' ')} loading {saved_dir}: {sorted(map(str, found))}")

    checks = []
    with torch.no_grad():
        inputs = {"input_ids": reference["input_ids"],
                  "attention_mask": reference["attention_mask"]}
        if model_type in ENCODERS:
            if "token_type_ids" in reference:
                inputs["token_type_ids"] = reference["token_type_ids"]
            checks.append(("last_hidden_state", model(**inputs).last_hidden_state,
                           reference["last_hidden_state"]))
        else:
            checks.append(("logits", model(**inputs).logits, reference["logits"]))
            if "single_ids" in reference:
                checks.append(("single_logits", model(input_ids=reference["single_ids"]).logits,
                               reference["single_logits"]))
    problems = []
    for name, got, want in checks:
        if got.shape != want.shape:
            problems.append(f"{name} has shape {list(got.shape)}, the reference {list(want.shape)}")
            continue
        diff = (got.float() - want).abs().max().item()
        print(f"  {name}: max abs diff {diff:.3e} (tolerance {TOLERANCE:g})")
        if not diff <= TOLERANCE:  # also catches NaN
            problems.append(f"{name} differ from the reference by {diff:.3e} > {TOLERANCE:g}")
    if problems:
        fail("; ".join(problems))
    print("ok: transformers computes the reference from", saved_dir)


if __name__ == "__main__":
    main()

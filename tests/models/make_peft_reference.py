"""LoRA fine-tuning as PEFT and transformers do it: the oracle of accel.peft's
parity test (test_peft_parity.sh, peft_parity.lua).

Usage: make_peft_reference.py OUT_DIR

For each case (OUT_DIR/cases.txt lists them, one a line) it writes under
OUT_DIR/CASE/:
  base/             a tiny random model made by transformers from a config
                    with a fixed seed (save_pretrained, safetensors; nothing
                    downloaded)
  init_adapter/     PEFT's freshly made adapter (get_peft_model), its lora_B
                    set to small random values (PEFT starts them at zero,
                    which would let a wrong lora_B gradient or scaling pass
                    unseen) and its modules_to_save copies as made, saved
                    with PEFT's save_pretrained
  trained_adapter/  the same adapter after 10 AdamW steps on a fixed batch
                    (torch.optim.AdamW with its defaults; PEFT's trainable
                    parameters only), saved by PEFT
  reference.safetensors
      input_ids      int64 [4, 16]   the batch (ids in [3, vocab))
      attention_mask int64 [4, 16]   ones
      labels         int64 [4, 16]   input_ids, -100 on row 1's first 5
      losses         f32 [10]        the loss before each step (train mode)
      logits_trained f32 [4, 16, V]  the trained PeftModel, eval mode
      logits_base    f32 [4, 16, V]  the same inside disable_adapter()
      logits_merged  f32 [4, 16, V]  merge_and_unload()'s model
  facts.json        {"trainable": n, "all": m} (get_nb_trainable_parameters
                    before training) and "adamw": torch.optim.AdamW's
                    defaults (lr, beta1, beta2, eps, weight_decay, amsgrad)

Cases: "llama" (grouped-query attention; target_modules a list with
q_proj, v_proj and down_proj; modules_to_save lm_head; r 4, alpha 8) and
"qwen2" (q/k/v biases; target_modules a regex on the full names,
.*\\.(q_proj|k_proj|o_proj); bias "lora_only"; use_rslora; r 8, alpha 16).
Attention is eager (the plain math), everything float32, dropout 0. Runs in
a few seconds on 2 cores and writes the same tensors on every run.
"""
import json
import os
import sys

import peft
import torch
import transformers
from safetensors.torch import save_file

torch.set_num_threads(2)
torch.use_deterministic_algorithms(True)
transformers.utils.logging.disable_progress_bar()
transformers.utils.logging.set_verbosity_error()

STEPS = 10
COMMON = dict(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
    rms_norm_eps=1e-6,
    initializer_range=0.1,
    attention_dropout=0.0,
    tie_word_embeddings=False,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
)

CASES = {
    "llama": (transformers.LlamaConfig, 11, dict(
        r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj", "down_proj"],
        modules_to_save=["lm_head"], task_type="CAUSAL_LM")),
    "qwen2": (transformers.Qwen2Config, 12, dict(
        r=8, lora_alpha=16, lora_dropout=0.0, target_modules=r".*\.(q_proj|k_proj|o_proj)",
        bias="lora_only", use_rslora=True, task_type="CAUSAL_LM")),
}


def batch(vocab):
    g = torch.Generator().manual_seed(20240607)
    ids = torch.randint(3, vocab, (4, 16), generator=g)
    mask = torch.ones_like(ids)
    labels = ids.clone()
    labels[1, :5] = -100
    return ids, mask, labels


def make_case(out, name):
    config_class, seed, lora = CASES[name]
    config = config_class(**COMMON)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").float()
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(os.path.join(out, "base"), safe_serialization=True)

    peft_model = peft.get_peft_model(model, peft.LoraConfig(**lora))
    g = torch.Generator().manual_seed(seed + 1000)
    with torch.no_grad():
        for param_name, p in peft_model.named_parameters():
            if ".lora_B." in param_name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    peft_model.save_pretrained(os.path.join(out, "init_adapter"))
    trainable, total = peft_model.get_nb_trainable_parameters()

    ids, mask, labels = batch(config.vocab_size)
    opt = torch.optim.AdamW([p for p in peft_model.parameters() if p.requires_grad])
    defaults = opt.defaults
    peft_model.train()
    losses = []
    for _ in range(STEPS):
        loss = peft_model(input_ids=ids, attention_mask=mask, labels=labels).loss
        losses.append(loss.item())
        loss.backward()
        opt.step()
        opt.zero_grad()
    peft_model.save_pretrained(os.path.join(out, "trained_adapter"))

    peft_model.eval()
    with torch.no_grad():
        logits_trained = peft_model(input_ids=ids, attention_mask=mask).logits
        with peft_model.disable_adapter():
            logits_base = peft_model(input_ids=ids, attention_mask=mask).logits
        merged = peft_model.merge_and_unload()
        logits_merged = merged(input_ids=ids, attention_mask=mask).logits
    save_file({
        "input_ids": ids,
        "attention_mask": mask,
        "labels": labels,
        "losses": torch.tensor(losses, dtype=torch.float32),
        "logits_trained": logits_trained.float().contiguous(),
        "logits_base": logits_base.float().contiguous(),
        "logits_merged": logits_merged.float().contiguous(),
    }, os.path.join(out, "reference.safetensors"))
    with open(os.path.join(out, "facts.json"), "w") as f:
        json.dump({
            "trainable": trainable,
            "all": total,
            "adamw": {
                "lr": defaults["lr"],
                "beta1": defaults["betas"][0],
                "beta2": defaults["betas"][1],
                "eps": defaults["eps"],
                "weight_decay": defaults["weight_decay"],
                "amsgrad": defaults["amsgrad"],
            },
        }, f, indent=2)
    print(f"{name}: losses {losses[0]:.6f} -> {losses[-1]:.6f}; trainable {trainable} of {total}")


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: make_peft_reference.py OUT_DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name in CASES:
        make_case(os.path.join(out, name), name)
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("".join(name + "\n" for name in CASES))


if __name__ == "__main__":
    main()

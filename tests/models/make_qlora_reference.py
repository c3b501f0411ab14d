"""QLoRA as PEFT + bitsandbytes run it on CPU, for accel's QLoRA parity test
(qlora_parity.lua).

Usage: make_qlora_reference.py OUT_DIR

A tiny Llama (seed 0, float32) loaded in 4 bits (nf4, double quantization,
compute dtype float32), prepare_model_for_kbit_training (gradient
checkpointing on), LoRA r 4 on q/k/v/o, gate/up/down; its initial adapter is
saved (OUT_DIR/init_adapter), then 10 AdamW steps (lr 1e-2, torch's
defaults otherwise) on one batch with labels = input_ids. Writes
OUT_DIR/float/ (the float model), OUT_DIR/trained_adapter/ (PEFT's
save_pretrained after the steps) and OUT_DIR/reference.safetensors:
input_ids int64 [2, 12], losses float32 [10].
"""
import os
import sys

os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
import torch  # noqa: E402
from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import AutoModelForCausalLM, BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM  # noqa: E402

torch.set_num_threads(2)
out_dir = sys.argv[1]
torch.manual_seed(0)
config = LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=192, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
LlamaForCausalLM(config).float().save_pretrained(os.path.join(out_dir, "float"))
model = AutoModelForCausalLM.from_pretrained(
    os.path.join(out_dir, "float"), dtype=torch.float32, device_map="cpu",
    quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                           bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.float32))
model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=True)
lora = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, task_type="CAUSAL_LM",
                  target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
model = get_peft_model(model, lora)
model.save_pretrained(os.path.join(out_dir, "init_adapter"))
model.train()  # also keeps bitsandbytes from repacking its weights (make_4bit_reference.py)
ids = torch.randint(0, 96, (2, 12))
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
losses = []
for _ in range(10):
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
    losses.append(loss.item())
model.save_pretrained(os.path.join(out_dir, "trained_adapter"))
save_file({"input_ids": ids, "losses": torch.tensor(losses)}, os.path.join(out_dir, "reference.safetensors"))
print("PEFT + bitsandbytes QLoRA losses: " + ", ".join(f"{x:.6f}" for x in losses))

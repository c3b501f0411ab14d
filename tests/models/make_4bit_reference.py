"""A tiny Llama quantized to 4 bits and saved by transformers + bitsandbytes,
for accel's parity test of 4-bit folders (four_bit_parity.lua).

Usage: make_4bit_reference.py OUT_DIR

Writes, for quant types nf4 (with double quantization) and fp4 (without):
  OUT_DIR/float/          the tiny Llama (seed 0) in float32, as save_pretrained writes it;
                          every in_features a multiple of 64: bitsandbytes' AVX-512 CPU
                          kernel decodes a weight whose rows are not whole blocks with the
                          blocks counted per row, not over the flat weight as they were
                          coded (its scalar and CUDA kernels, and accel, count them flat)
  OUT_DIR/<type>/         transformers' save_pretrained of it loaded with
                          BitsAndBytesConfig(load_in_4bit, bnb_4bit_quant_type =
                          <type>, compute dtype float32)
  OUT_DIR/reference.safetensors: input_ids int64 [2, 7] and
                          "<type>|logits", the 4-bit model's logits of them
"""
import os
import sys

os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import AutoModelForCausalLM, BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM  # noqa: E402

torch.set_num_threads(2)
out_dir = sys.argv[1]
torch.manual_seed(0)
config = LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=192, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
model = LlamaForCausalLM(config).float()
model.save_pretrained(os.path.join(out_dir, "float"))
ids = torch.randint(0, 96, (2, 7))
ref = {"input_ids": ids}
for quant_type, double in (("nf4", True), ("fp4", False)):
    q = AutoModelForCausalLM.from_pretrained(
        os.path.join(out_dir, "float"), dtype=torch.float32, device_map="cpu",
        quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=quant_type,
                                               bnb_4bit_use_double_quant=double,
                                               bnb_4bit_compute_dtype=torch.float32))
    # Training mode: in eval mode on a CPU with AVX-512 BF16, bitsandbytes repacks
    # the weights for its own kernel in place (and fails on nested statistics).
    q.train()
    with torch.no_grad():
        ref[f"{quant_type}|logits"] = q(input_ids=ids).logits.float().contiguous()
    q.save_pretrained(os.path.join(out_dir, quant_type))
save_file(ref, os.path.join(out_dir, "reference.safetensors"))
print("transformers saved the tiny Llama in 4 bits (nf4 with double quantization, fp4)")

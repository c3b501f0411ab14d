"""The checkpoint and prompts of bench/models: a Llama-architecture model
with random weights, made by transformers' own LlamaConfig and
save_pretrained (safetensors, float32), nothing downloaded; and the prompts
both sides generate from, in prompts.json.
    python make_checkpoint.py OUT_DIR [--hidden 768 --layers 12 --heads 12
        --kv-heads 4 --intermediate 2048 --vocab 32000 --prompt 128 --seed 0
        --tie-embeddings]
Prompts: "b1" one row of PROMPT ids; "b8" eight rows, rows 1, 4 and 6
(0-based) left-padded (their first 16, 48 and 96 positions are pad 0 with
attention_mask 0). Ids are in [3, vocab): never pad 0, bos 1 or eos 2.
"""
import argparse
import json
import os
import time

import torch
import transformers

PAD, BOS, EOS = 0, 1, 2
LEFT_PADDING = {1: 16, 4: 48, 6: 96}  # row -> pad positions, batch 8


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--intermediate", type=int, default=2048)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--prompt", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tie-embeddings", action="store_true", help="lm_head shares the input embeddings' weight")
    a = p.parse_args()
    start = time.perf_counter()
    config = transformers.LlamaConfig(
        vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.intermediate,
        num_hidden_layers=a.layers, num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
        max_position_embeddings=2048, rms_norm_eps=1e-6, initializer_range=0.02,
        tie_word_embeddings=a.tie_embeddings, pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS)
    torch.manual_seed(a.seed)
    model = transformers.LlamaForCausalLM(config).float().eval()
    params = sum(t.numel() for t in model.parameters())
    model.save_pretrained(a.out, safe_serialization=True)

    g = torch.Generator().manual_seed(a.seed + 1)
    prompts = {}
    for name, rows in (("b1", 1), ("b8", 8)):
        ids = torch.randint(3, a.vocab, (rows, a.prompt), generator=g)
        mask = torch.ones_like(ids)
        if rows > 1:
            for row, n in LEFT_PADDING.items():
                n = min(n, a.prompt - 1)
                ids[row, :n] = PAD
                mask[row, :n] = 0
        prompts[name] = {"input_ids": ids.tolist(), "attention_mask": mask.tolist()}
    with open(os.path.join(a.out, "prompts.json"), "w") as f:
        json.dump(prompts, f)
    with open(os.path.join(a.out, "bench_info.json"), "w") as f:
        json.dump({"parameters": params, **vars(a)}, f)
    print(f"checkpoint: {params / 1e6:.1f}M parameters in {a.out} ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()

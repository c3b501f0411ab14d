"""PyTorch's own tensor parallelism (DTensor) on the tiny Llama that accel
trains under TP 2 in test_dtensor_parity.sh: the oracle for accel's losses.

Usage:
  dtensor_parity.py make OUT_DIR
      transformers builds a tiny LlamaForCausalLM from its config with a
      fixed seed (nothing downloaded) and saves it in OUT_DIR/model
      (safetensors); OUT_DIR/data.safetensors holds the token ids, "ids"
      int64 [STEPS * ROWS, T + 1] (0-based, as transformers uses them).
      Then it trains the model STEPS AdamW steps twice and writes the loss
      of every step to OUT_DIR/torch_losses.json:
        one_process   one process, no parallelism
        dtensor_tp2   2 processes (torch.multiprocessing, Gloo, CPU) over
                      init_device_mesh("cpu", (2,)), parallelize_module with
                      transformers' Llama plan: q/k/v and gate/up
                      ColwiseParallel, o/down RowwiseParallel, the embedding
                      RowwiseParallel (split over the vocabulary, input
                      replicated), lm_head ColwiseParallel with its logits
                      gathered (output_layouts=Replicate()).
      Step s trains on rows [s * ROWS, (s + 1) * ROWS): inputs the first T
      ids, targets the next ones, the loss F.cross_entropy of the logits.
  dtensor_parity.py compare OUT_DIR NAME=LOSSES.json...
      Every named list of losses (accel's, one JSON array each) against
      dtensor_tp2, step by step; exits 1 when one differs by more than TOL.

transformers' attention reads its head counts off the projections' widths
(view(..., -1, head_dim)), so the column-parallel q/k/v give each rank its
local heads without touching the attention module.
"""
import json
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
import transformers
from safetensors.torch import load_file, save_file

from make_checkpoints import COMMON

STEPS, ROWS, T = 10, 4, 16
TOL = 1e-5
ADAMW = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
# make_checkpoints.py's tiny Llama, without a padding id: DTensor's
# vocabulary-split embedding is checked here, not its padding row.
CONFIG = dict(COMMON, num_key_value_heads=2, tie_word_embeddings=False, pad_token_id=None)

transformers.utils.logging.disable_progress_bar()
transformers.utils.logging.set_verbosity_error()


def load_model(out):
    model = transformers.LlamaForCausalLM.from_pretrained(
        os.path.join(out, "model"), dtype=torch.float32, attn_implementation="eager")
    return model.train()  # dropout is 0: train mode changes nothing but says what this is


def train(model, ids):
    # foreach=False: the norms' weights stay plain tensors beside the DTensors.
    opt = torch.optim.AdamW(model.parameters(), foreach=False, **ADAMW)
    losses = []
    for step in range(STEPS):
        rows = ids[step * ROWS:(step + 1) * ROWS]
        logits = model(input_ids=rows[:, :T]).logits
        loss = F.cross_entropy(logits.reshape(-1, CONFIG["vocab_size"]), rows[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def tp_worker(rank, out, port):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    mesh = init_device_mesh("cpu", (2,))
    model = load_model(out)
    plan = {
        "model.embed_tokens": RowwiseParallel(input_layouts=Replicate()),
        "lm_head": ColwiseParallel(output_layouts=Replicate()),
    }
    for i in range(CONFIG["num_hidden_layers"]):
        for name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj"):
            plan[f"model.layers.{i}.{name}"] = ColwiseParallel()
        for name in ("self_attn.o_proj", "mlp.down_proj"):
            plan[f"model.layers.{i}.{name}"] = RowwiseParallel()
    parallelize_module(model, mesh, plan)
    q = model.model.layers[0].self_attn.q_proj.weight
    assert q.to_local().shape[0] * 2 == q.shape[0], "q_proj is split over the 2 ranks"
    losses = train(model, load_file(os.path.join(out, "data.safetensors"))["ids"])
    if rank == 0:
        with open(os.path.join(out, "dtensor_losses.json"), "w") as f:
            json.dump(losses, f)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make(out):
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**CONFIG))
    model.save_pretrained(os.path.join(out, "model"), safe_serialization=True)
    ids = torch.randint(0, CONFIG["vocab_size"], (STEPS * ROWS, T + 1), generator=torch.Generator().manual_seed(1))
    save_file({"ids": ids}, os.path.join(out, "data.safetensors"))
    torch.set_num_threads(2)
    one = train(load_model(out), ids)
    mp.spawn(tp_worker, args=(out, free_port()), nprocs=2, join=True)
    with open(os.path.join(out, "dtensor_losses.json")) as f:
        tp2 = json.load(f)
    with open(os.path.join(out, "torch_losses.json"), "w") as f:
        json.dump({"one_process": one, "dtensor_tp2": tp2}, f)
    worst = max(abs(a - b) for a, b in zip(one, tp2))
    print(f"PyTorch: DTensor TP 2 against one process, largest loss difference {worst:.2e}")


def compare(out, named):
    with open(os.path.join(out, "torch_losses.json")) as f:
        reference = json.load(f)
    runs = {"torch 1 process": reference["one_process"]}
    for item in named:
        name, path = item.split("=", 1)
        with open(path) as f:
            runs[name] = json.load(f)
    tp2 = reference["dtensor_tp2"]
    print(f"{'step':>4}  {'DTensor TP 2':>12}  " + "  ".join(f"{name:>16}" for name in runs))
    for step, loss in enumerate(tp2):
        print(f"{step + 1:>4}  {loss:12.8f}  " + "  ".join(f"{run[step]:16.8f}" for run in runs.values()))
    failed = False
    for name, run in runs.items():
        if len(run) != len(tp2):
            print(f"{name}: {len(run)} losses, DTensor TP 2 has {len(tp2)}")
            failed = True
            continue
        worst = max(abs(a - b) for a, b in zip(run, tp2))
        print(f"{name} against DTensor TP 2: largest loss difference {worst:.2e} (tolerance {TOL:g})")
        failed = failed or not worst <= TOL
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "make":
        make(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3:]))
    else:
        sys.exit(__doc__)

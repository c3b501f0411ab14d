"""The sharding benchmark's model in PyTorch: the twin of
bench/sharding_memory/lm.lua (same blocks, sizes, data and measurements),
trained with DistributedDataParallel and either torch.optim.AdamW ("ddp") or
torch.distributed.optim.ZeroRedundancyOptimizer over AdamW ("zero", which
shards the optimizer state as accel's zero_stage = 1 does). Run by
bench/sharding_memory/harness.py:
    /usr/bin/python3 bench/python/torchrun.py --nproc_per_node 2 bench/sharding_memory/lm.py ddp|zero \
        [--layers 12 --width 768 --heads 12 --vocab 8192 --seq 64 --batch 2 --warmup 1 --steps 3]
Each rank prints one line `SHARDING {...}` (keys: bench/sharding_memory/harness.py).
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention, then a 4x GELU feed-forward."""

    def __init__(self, width, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.proj = nn.Linear(4 * width, width)

    def forward(self, x, causal):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, attn_mask=causal, need_weights=False)[0]
        return x + self.proj(F.gelu(self.fc(self.norm2(x))))


class LanguageModel(nn.Module):
    def __init__(self, vocab, width, heads, layers, seq):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(seq, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)
        # -inf above the diagonal: a position attends to itself and earlier ones
        # (a float mask: DDP broadcasts buffers, and Gloo broadcasts no bool).
        self.register_buffer("causal", torch.full((seq, seq), float("-inf")).triu(1), persistent=False)

    def forward(self, ids):
        x = self.tokens(ids) + self.positions.weight[:ids.size(1)]
        for block in self.blocks:
            x = block(x, self.causal)
        return self.head(self.norm(x))


def status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def reset_peak_rss():
    """Starts VmHWM again from the current RSS (Linux's clear_refs, value 5)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def tensor_bytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors if torch.is_tensor(t))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["ddp", "zero"])
    for name, default in [("layers", 12), ("width", 768), ("heads", 12), ("vocab", 8192), ("seq", 64),
                          ("batch", 2), ("warmup", 1), ("steps", 3)]:
        parser.add_argument("--" + name, type=int, default=default)
    a = parser.parse_args()

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    rss_base = status_kib("VmRSS")
    torch.manual_seed(0)
    model = DistributedDataParallel(LanguageModel(a.vocab, a.width, a.heads, a.layers, a.seq))
    if a.mode == "zero":
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-4)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    init_peak = status_kib("VmHWM")
    reset_peak_rss()

    # Random tokens, each rank its own: the figures are memory and time, not what is learnt.
    torch.manual_seed(1 + rank)
    ids = torch.randint(0, a.vocab, (4, a.batch, a.seq + 1))
    state_bytes = {}
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            start = time.monotonic()
        batch = ids[step % len(ids)]
        logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, a.vocab), batch[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        if step == a.warmup + a.steps - 1:
            # What the rank holds after its last step, before the gradients are cleared.
            params = list(model.parameters())
            local = opt.optim if a.mode == "zero" else opt
            state_bytes = {
                "param_bytes": tensor_bytes(params),
                "grad_bytes": tensor_bytes(p.grad for p in params),
                "optim_bytes": sum(tensor_bytes(s.values()) for s in local.state.values()),
            }
        opt.zero_grad(set_to_none=True)
        last_loss = loss.item()
    seconds = time.monotonic() - start
    report = {"rank": rank, "world": world, "numel": sum(p.numel() for p in model.parameters()),
              "unit_numel": 0,
              "samples_per_s": a.batch * world * a.steps / seconds, "loss": last_loss,
              "rss_base_kib": rss_base, "init_peak_kib": init_peak, "train_peak_kib": status_kib("VmHWM"),
              **state_bytes}
    os.write(1, ("SHARDING " + json.dumps(report) + "\n").encode())  # one write: ranks share the pipe
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""W3 char-lm in Python with DDP: embedding 96 -> 128, two causal Transformer
encoder layers (4 heads, feed-forward 512, PyTorch's defaults otherwise), a
linear head to 96; windows of 64 characters of GPL-3 (byte b -> b - 32 for
printable ASCII, 95 otherwise), batch 16 per rank, AdamW lr 1e-3. Twin of
bench/workloads/char_lm.lua and bench/cpp/char_lm.cpp.
    /usr/bin/python3 bench/python/torchrun.py --nproc_per_node 2 bench/python/char_lm.py [warmup window windows]
"""
import torch
import torch.nn.functional as F
from torch import nn

import common

VOCAB, DIM, SEQ = 96, 128, 64


class CharLm(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(DIM, 4, dim_feedforward=512, batch_first=True) for _ in range(2))
        self.head = nn.Linear(DIM, VOCAB)
        self.register_buffer("causal", torch.triu(torch.full((SEQ, SEQ), float("-inf")), 1), persistent=False)

    def forward(self, ids):
        h = self.embed(ids)
        for layer in self.layers:
            h = layer(h, src_mask=self.causal)
        return self.head(h)


rank, world = common.setup()
with open("/usr/share/common-licenses/GPL-3", "rb") as f:
    text = f.read()
all_ids = torch.tensor([b - 32 if 32 <= b <= 126 else 95 for b in text])
n = (len(all_ids) - 1 - SEQ) // SEQ + 1
x = all_ids[:n * SEQ].view(n, SEQ)
y = all_ids[1:n * SEQ + 1].view(n, SEQ)
sampler, batches = common.loader(x, y, 16, rank, world)

model = common.prepare(CharLm(), world)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)


def step(xb, yb):
    loss = F.cross_entropy(model(xb).reshape(-1, VOCAB), yb.reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


common.train(sampler, batches, step, rank, world)

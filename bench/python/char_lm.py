"""W3 char-lm in Python with DDP: embedding 96 -> 128, two causal Transformer
encoder layers (4 heads, feed-forward 512, PyTorch's defaults otherwise), a
linear head to 96; windows of 64 characters of GPL-3 (byte b -> b - 32 for
printable ASCII, 95 otherwise), batch 16 per rank, AdamW lr 1e-3. Twin of
bench/workloads/char_lm.lua and bench/cpp/char_lm.cpp.
ACCEL_BENCH_CHARLM=large selects char-lm-large for the GPU table: width 1024,
8 layers of 16 heads, feed-forward 4096, windows of 256, batch 64.
    /usr/bin/python3 bench/python/torchrun.py --nproc_per_node 2 bench/python/char_lm.py [warmup window windows]
    python3 bench/python/char_lm.py [warmup window windows]      (one process)
"""
import os

import torch
from torch import nn

import common

# width, layers, heads, feed-forward, window length, batch per rank
SIZES = {"small": (128, 2, 4, 512, 64, 16), "large": (1024, 8, 16, 4096, 256, 64)}
VOCAB = 96
DIM, LAYERS, HEADS, FEED_FORWARD, SEQ, BATCH = SIZES[os.environ.get("ACCEL_BENCH_CHARLM", "small")]


class CharLm(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(DIM, HEADS, dim_feedforward=FEED_FORWARD, batch_first=True)
            for _ in range(LAYERS))
        self.head = nn.Linear(DIM, VOCAB)
        self.register_buffer("causal", torch.triu(torch.full((SEQ, SEQ), float("-inf")), 1), persistent=False)

    def forward(self, ids):
        h = self.embed(ids)
        for layer in self.layers:
            h = layer(h, src_mask=self.causal)
        return self.head(h)


def build():
    with open("/usr/share/common-licenses/GPL-3", "rb") as f:
        text = f.read()
    all_ids = torch.tensor([b - 32 if 32 <= b <= 126 else 95 for b in text])
    n = (len(all_ids) - 1 - SEQ) // SEQ + 1
    x = all_ids[:n * SEQ].view(n, SEQ)
    y = all_ids[1:n * SEQ + 1].view(n, SEQ)
    return CharLm(), x, y, BATCH


if __name__ == "__main__":
    common.main(build)

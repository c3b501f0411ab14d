"""PyTorch's own loop for tests/gpu/charlm_parity.lua: the same model, loaded
from the weights that recipe wrote, the same batches in the same order,
AdamW lr 1e-3, on the GPU; prints "step K LOSS".
    python3 tests/gpu/charlm_parity.py DIR
"""
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import nn

VOCAB, DIM, SEQ, STEPS = 96, 128, 64, 20


class CharLm(nn.Module):
    def __init__(self):
        super().__init__()
        layers = [nn.TransformerEncoderLayer(DIM, 4, dim_feedforward=512, dropout=0.0, batch_first=True)
                  for _ in range(2)]
        # Named as accel's Sequential names them, from 1.
        self.seq = nn.ModuleDict({"1": nn.Embedding(VOCAB, DIM), "2": layers[0], "3": layers[1],
                                  "4": nn.Linear(DIM, VOCAB)})
        self.register_buffer("causal", torch.triu(torch.full((SEQ, SEQ), float("-inf")), 1), persistent=False)

    def forward(self, ids):
        h = self.seq["1"](ids)
        h = self.seq["2"](h, src_mask=self.causal, is_causal=True)
        h = self.seq["3"](h, src_mask=self.causal, is_causal=True)
        return self.seq["4"](h)


device = torch.device("cuda:0")
model = CharLm()
weights = load_file(sys.argv[1] + "/model.safetensors")
model.seq.load_state_dict(weights, strict=True)
model.to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
with open("/usr/share/common-licenses/GPL-3", "rb") as f:
    text = f.read()
ids = torch.tensor([b - 32 if 32 <= b <= 126 else 95 for b in text])
n = STEPS * 16
x = ids[:n * SEQ].view(n, SEQ)
y = ids[1:n * SEQ + 1].view(n, SEQ)
for step in range(STEPS):
    xb = x[step * 16:(step + 1) * 16].to(device)
    yb = y[step * 16:(step + 1) * 16].to(device)
    loss = F.cross_entropy(model(xb).reshape(-1, VOCAB), yb.reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    print(f"step {step + 1} {loss.item():.9g}")

"""W2 cnn in Python with DDP: conv 1->16 k3, ReLU, maxpool 2, conv 16->32 k3,
ReLU, maxpool 2, linear to 10, on 2048 synthetic 1x28x28 images (randn and
randint after seeding 0), batch 32 per rank, AdamW lr 1e-3. Twin of
bench/workloads/cnn.lua and bench/cpp/cnn.cpp.
    /usr/bin/python3 bench/python/torchrun.py --nproc_per_node 2 bench/python/cnn.py [warmup window windows]
"""
import torch
import torch.nn.functional as F
from torch import nn

import common

rank, world = common.setup()
x = torch.randn(2048, 1, 28, 28)
y = torch.randint(0, 10, (2048,))
sampler, batches = common.loader(x, y, 32, rank, world)

model = common.prepare(nn.Sequential(
    nn.Conv2d(1, 16, 3), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(32 * 5 * 5, 10)), world)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)


def step(xb, yb):
    loss = F.cross_entropy(model(xb), yb)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


common.train(sampler, batches, step, rank, world)

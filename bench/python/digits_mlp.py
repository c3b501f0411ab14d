"""W1 digits-mlp in Python with DDP: MLP 64-256-256-10 on the digits set,
batch 64 per rank, AdamW lr 1e-3, seed 0. Twin of bench/workloads/digits_mlp.lua
and bench/cpp/digits_mlp.cpp.
    /usr/bin/python3 bench/python/torchrun.py --nproc_per_node 2 bench/python/digits_mlp.py [warmup window windows]
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import common

rank, world = common.setup()
rows = torch.from_numpy(np.loadtxt("/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz",
                                   delimiter=",", dtype=np.float32))
x = rows[:, :64] / 16
y = rows[:, 64].long()
sampler, batches = common.loader(x, y, 64, rank, world)

model = common.prepare(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                                     nn.Linear(256, 10)), world)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)


def step(xb, yb):
    loss = F.cross_entropy(model(xb), yb)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


common.train(sampler, batches, step, rank, world)

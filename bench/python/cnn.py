"""W2 cnn in Python with DDP: conv 1->16 k3, ReLU, maxpool 2, conv 16->32 k3,
ReLU, maxpool 2, linear to 10, on 2048 synthetic 1x28x28 images (randn and
randint after seeding 0), batch 32 per rank, AdamW lr 1e-3. Twin of
bench/workloads/cnn.lua and bench/cpp/cnn.cpp.
    /usr/bin/python3 bench/python/torchrun.py --nproc_per_node 2 bench/python/cnn.py [warmup window windows]
    python3 bench/python/cnn.py [warmup window windows]      (one process)
"""
import torch
from torch import nn

import common


def build():
    x = torch.randn(2048, 1, 28, 28)
    y = torch.randint(0, 10, (2048,))
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 5 * 5, 10))
    return model, x, y, 32


if __name__ == "__main__":
    common.main(build)

"""W1 digits-mlp in Python with DDP: MLP 64-256-256-10 on the digits set,
batch 64 per rank, AdamW lr 1e-3, seed 0. Twin of bench/workloads/digits_mlp.lua
and bench/cpp/digits_mlp.cpp. The data is Debian's scikit-learn's, or the file
ACCEL_BENCH_DIGITS names (where scikit-learn came from pip).
    /usr/bin/python3 bench/python/torchrun.py --nproc_per_node 2 bench/python/digits_mlp.py [warmup window windows]
    python3 bench/python/digits_mlp.py [warmup window windows]      (one process)
"""
import os

import numpy as np
import torch
from torch import nn

import common


def build():
    path = os.environ.get("ACCEL_BENCH_DIGITS", "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz")
    rows = torch.from_numpy(np.loadtxt(path, delimiter=",", dtype=np.float32))
    x = rows[:, :64] / 16
    y = rows[:, 64].long()
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    return model, x, y, 64


if __name__ == "__main__":
    common.main(build)

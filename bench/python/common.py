"""What the Python workloads share with their Lua and C++ twins
(bench/workloads/bench.lua, bench/cpp/bench_common.h): the command line
(warm-up steps, steps per window, windows), the setup a torchrun-started
DDP script makes, the timed loop over epochs and the BENCH line
bench/python/harness.py reads.

Batches are gathered with one index per batch (a BatchSampler as the
sampler), as accel's loader and the C++ version gather them, rather than
sample by sample; the order is DistributedSampler's, which is accel's too.
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, TensorDataset


def config():
    values = [max(1, int(a)) for a in sys.argv[1:4]]
    warmup, window, windows = values + [20, 50, 5][len(values):]
    return warmup, window, windows


def setup():
    """One intra-op thread, the process group, seed 0; returns (rank, world)."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    return dist.get_rank(), dist.get_world_size()


def prepare(model, world):
    """DDP across ranks; a single process trains the model as it is (as accel does)."""
    return DistributedDataParallel(model) if world > 1 else model


def loader(x, y, batch_size, rank, world):
    sampler = DistributedSampler(TensorDataset(x, y), num_replicas=world, rank=rank, shuffle=True, seed=0)
    batches = DataLoader(TensorDataset(x, y), sampler=BatchSampler(sampler, batch_size, drop_last=False),
                         batch_size=None)
    return sampler, batches


def _status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def _loaded_blas():
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if path.startswith("/") and "blas" in os.path.basename(path):  # not liblapack in a blas folder
                return path
    return "none"


def train(sampler, batches, step, rank, world):
    """Runs step(x, y) -> loss float until warm-up + window * windows steps, then prints BENCH."""
    warmup, window, windows_wanted = config()
    total = warmup + window * windows_wanted
    steps, first_step, window_start, window_samples, loss_sum = 0, 0.0, 0.0, 0, 0.0
    windows = []
    epoch = 0
    while steps < total:
        sampler.set_epoch(epoch)
        epoch += 1
        for x, y in batches:
            loss = step(x, y)
            steps += 1
            if steps == 1:
                first_step = time.monotonic()
            if steps == warmup:
                window_start = time.monotonic()
            elif steps > warmup:
                window_samples += x.size(0)
                if (steps - warmup) % window == 0:
                    t = time.monotonic()
                    windows.append(window_samples * world / (t - window_start))
                    window_start, window_samples = t, 0
            if steps > total - window:
                loss_sum += loss
            if steps == total:
                break
    report = {"rank": rank, "world": world, "first_step": first_step, "windows": windows,
              "loss": loss_sum / window, "vmhwm_kib": _status_kib("VmHWM"), "blas": _loaded_blas()}
    os.write(1, ("BENCH " + json.dumps(report) + "\n").encode())  # one write: ranks share the pipe
    dist.destroy_process_group()

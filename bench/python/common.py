"""What the Python workloads share with their Lua and C++ twins
(bench/workloads/bench.lua, bench/cpp/bench_common.h): the command line
(warm-up steps, steps per window, windows), the setup a torchrun-started
DDP script makes, the training step, the timed loop over epochs and the
BENCH line bench/python/harness.py and bench/gpu/harness.py read.

Each workload module has build() -> (model, x, y, batch size), called after
the seed is set; main(build) trains it with plain PyTorch (DDP under
torchrun, one process otherwise) and accelerate_run.py with Accelerate.

Batches are gathered with one index per batch (the dataset's __getitems__),
as accel's loader and the C++ version gather them, rather than sample by
sample; the order is DistributedSampler's, which is accel's too.

The device is ACCEL_BENCH_DEVICE (default cpu): the model is moved there and
the batches follow from pinned memory with non-blocking copies on cuda.
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, TensorDataset

DEVICE = torch.device(os.environ.get("ACCEL_BENCH_DEVICE", "cpu"))


def config(argv):
    """(warm-up steps, steps per window, windows) from up to three arguments."""
    values = [max(1, int(a)) for a in argv[:3]]
    warmup, window, windows = values + [20, 50, 5][len(values):]
    return warmup, window, windows


def setup():
    """One intra-op thread, the process group under torchrun, seed 0; returns (rank, world)."""
    torch.set_num_threads(1)
    if "WORLD_SIZE" in os.environ:
        dist.init_process_group("gloo")
    torch.manual_seed(0)
    return (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)


class _BatchGather(TensorDataset):
    """A TensorDataset that DataLoader asks for a whole batch at once."""

    def __getitems__(self, indices):
        return [t[indices] for t in self.tensors]


def _as_gathered(batch):
    return batch


def loader(x, y, batch_size, rank, world):
    """(sampler, batches): the sampler takes set_epoch, the batches are (x, y) on the CPU."""
    sampler = DistributedSampler(TensorDataset(x, y), num_replicas=world, rank=rank, shuffle=True, seed=0)
    batches = DataLoader(_BatchGather(x, y), batch_sampler=BatchSampler(sampler, batch_size, drop_last=False),
                         collate_fn=_as_gathered, pin_memory=DEVICE.type == "cuda")
    return sampler, batches


class _OnDevice:
    """Iterates over batches copied to DEVICE, each pass anew (one per epoch)."""

    def __init__(self, batches):
        self.batches = batches

    def __iter__(self):
        return ((x.to(DEVICE, non_blocking=True), y.to(DEVICE, non_blocking=True)) for x, y in self.batches)


def step(model, opt, backward):
    """One training step as a function (x, y) -> loss float; outputs of any shape end in the classes."""
    def run(xb, yb):
        out = model(xb)
        loss = F.cross_entropy(out.reshape(-1, out.size(-1)), yb.reshape(-1))
        backward(loss)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()
    return run


def main(build):
    """Trains build()'s model with plain PyTorch: DDP across torchrun's ranks, the bare model on one."""
    rank, world = setup()
    model, x, y, batch_size = build()
    model = model.to(DEVICE)
    if world > 1:
        model = DistributedDataParallel(model)
    sampler, batches = loader(x, y, batch_size, rank, world)
    if DEVICE.type != "cpu":
        batches = _OnDevice(batches)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    train(sampler, batches, step(model, opt, lambda loss: loss.backward()), rank, world, config(sys.argv[1:]))
    if dist.is_initialized():
        dist.destroy_process_group()


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


def train(sampler, batches, step, rank, world, loop):
    """Runs step(x, y) -> loss float until warm-up + window * windows steps (loop), then prints BENCH.
    With ACCEL_BENCH_PROFILE=FILE, the 5 steps after the warm-up are traced into FILE (Chrome trace),
    as bench/workloads/bench.lua traces accel's."""
    trace = os.environ.get("ACCEL_BENCH_PROFILE")
    if not trace:
        return _loop(sampler, batches, step, rank, world, loop, None)
    warmup = loop[0]
    schedule = torch.profiler.schedule(skip_first=max(0, warmup - 2), wait=0, warmup=min(2, warmup), active=5,
                                       repeat=1)
    with torch.profiler.profile(schedule=schedule,
                                on_trace_ready=lambda p: p.export_chrome_trace(trace)) as prof:
        _loop(sampler, batches, step, rank, world, loop, prof)


def _loop(sampler, batches, step, rank, world, loop, prof):
    warmup, window, windows_wanted = loop
    total = warmup + window * windows_wanted
    steps, first_step, window_start, window_samples, loss_sum = 0, 0.0, 0.0, 0, 0.0
    windows = []
    device = "none"
    epoch = 0
    while steps < total:
        sampler.set_epoch(epoch)
        epoch += 1
        for x, y in batches:
            loss = step(x, y)
            if prof:
                prof.step()
            steps += 1
            if steps == 1:
                first_step = time.monotonic()
                device = str(x.device)
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
              "loss": loss_sum / window, "vmhwm_kib": _status_kib("VmHWM"), "blas": _loaded_blas(),
              "device": device}
    if device.startswith("cuda"):
        report["gpu_mib"] = torch.cuda.max_memory_allocated() / 2**20
    os.write(1, ("BENCH " + json.dumps(report) + "\n").encode())  # one write: ranks share the pipe

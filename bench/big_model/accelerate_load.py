"""Accelerate's side of bench/big_model: the same model and checkpoint,
built under init_empty_weights and loaded with load_checkpoint_and_dispatch,
printing the same figures as load.lua.
    python bench/big_model/accelerate_load.py FOLDER [MAX_MEMORY OFFLOAD_FOLDER]
"""
import os
import resource
import sys
import time

import torch
from accelerate import init_empty_weights, load_checkpoint_and_dispatch


class Net(torch.nn.Module):
    # Keyed "1".."n": accel's ModuleList counts from 1, so its checkpoint
    # names the layers layers.1 ... layers.n.
    def __init__(self, n):
        super().__init__()
        self.layers = torch.nn.ModuleDict({str(i + 1): torch.nn.Linear(4096, 4096) for i in range(n)})

    def forward(self, x):
        for i in range(len(self.layers)):
            x = self.layers[str(i + 1)](x).relu()
        return x


def rss_mib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024


def main():
    folder = sys.argv[1]
    torch.set_num_threads(1)
    start_rss = rss_mib("VmRSS")
    with init_empty_weights():
        model = Net(int(os.environ.get("BIG_MODEL_LAYERS", "32")))
    kwargs = {"device_map": {"": "cpu"}}
    if len(sys.argv) > 2:
        # A number is bytes, as in load.lua; Accelerate takes bytes as an int.
        budget = int(sys.argv[2]) if sys.argv[2].isdigit() else sys.argv[2]
        kwargs = {"device_map": "auto", "max_memory": {"cpu": budget}, "offload_folder": sys.argv[3]}
    start = time.perf_counter()
    model = load_checkpoint_and_dispatch(model, folder, **kwargs)
    load_s = time.perf_counter() - start
    kept = sum(t.numel() * t.element_size() for t in list(model.parameters()) + list(model.buffers())
               if t.device.type == "cpu")
    print(f"load: {load_s:.2f} s, weights kept in memory {kept / 2**20:.1f} MiB, peak RSS {rss_mib('VmHWM'):.1f} MiB "
          f"({start_rss:.1f} MiB at start)")
    torch.manual_seed(1)
    x = torch.randn(8, 4096)
    start = time.perf_counter()
    with torch.no_grad():
        y = model(x)
    forward_s = time.perf_counter() - start
    peak = rss_mib("VmHWM")
    print(f"forward: {forward_s:.2f} s (load and forward {load_s + forward_s:.2f} s), output sum {y.sum().item():.6f}, "
          f"peak RSS {peak:.1f} MiB, peak over start / kept = {(peak - start_rss) * 2**20 / max(kept, 1):.3f}")


if __name__ == "__main__":
    main()

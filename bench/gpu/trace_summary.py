"""Reads Chrome traces of the same training steps (bench/workloads/bench.lua
and bench/python/common.py write them with ACCEL_BENCH_PROFILE=FILE: 5 steps
after the warm-up) and prints what each step costs the host and the GPU,
side by side: the host's span of the step, the GPU's busy time, kernels
launched, operators dispatched, the CUDA runtime calls that wait for the
GPU, and the operators dispatched most.
    python3 bench/gpu/trace_summary.py NAME=TRACE.json [NAME=TRACE.json ...] [--steps 5]
"""
import argparse
import collections
import json

WAITS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy",
         "cudaStreamWaitEvent")


def summary(path, steps):
    with open(path) as f:
        trace = json.load(f)
    # Kineto writes {"traceEvents": [...]}; LibTorch's profiler without Kineto a bare list.
    events = [e for e in (trace["traceEvents"] if isinstance(trace, dict) else trace) if e.get("ph") == "X"]
    host = [e for e in events if e.get("cat") in ("cpu_op", "cuda_runtime", "cuda_driver")]
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    runtime = collections.Counter(e["name"] for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver"))
    start = min(e["ts"] for e in host)
    end = max(e["ts"] + e["dur"] for e in host + gpu)
    return {
        "step ms (span / steps)": (end - start) / steps / 1000,
        "GPU busy ms per step": sum(e["dur"] for e in gpu) / steps / 1000,
        "kernels per step": sum(1 for e in gpu if e["cat"] == "kernel") / steps,
        "operators per step": len(ops) / steps,
        "kernel launches per step": sum(n for k, n in runtime.items() if "LaunchKernel" in k) / steps,
        "waits per step (" + ", ".join(w.replace("cuda", "") for w in WAITS) + ")":
            sum(n for k, n in runtime.items() if k.startswith(WAITS)) / steps,
        "memcpy calls per step": sum(n for k, n in runtime.items() if "Memcpy" in k) / steps,
    }, collections.Counter(e["name"] for e in ops), runtime


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+", help="NAME=TRACE.json")
    parser.add_argument("--steps", type=int, default=5, help="steps in each trace (default 5)")
    args = parser.parse_args()
    names, results = [], []
    for item in args.traces:
        name, path = item.split("=", 1)
        names.append(name)
        results.append(summary(path, args.steps))
    print("| per step | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for key in results[0][0]:
        print(f"| {key} | " + " | ".join(f"{r[0][key]:.2f}" for r in results) + " |")
    for name, (_, ops, runtime) in zip(names, results):
        print(f"\n{name}: operators dispatched most (per step): "
              + ", ".join(f"{k} {n / args.steps:.0f}" for k, n in ops.most_common(14)))
        print(f"{name}: CUDA runtime calls (per step): "
              + ", ".join(f"{k} {n / args.steps:.1f}" for k, n in runtime.most_common(8)))


if __name__ == "__main__":
    main()

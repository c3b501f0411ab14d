"""Measures the CPU allocator under the three workloads (bench/README.md), on
one rank: accel with its own caching allocator, and with LibTorch's allocator
(ACCEL_CPU_ALLOCATOR=system) over glibc, jemalloc and tcmalloc; the C++
reference over glibc, glibc told to keep freed memory, jemalloc and tcmalloc.
jemalloc and tcmalloc are Debian's (libjemalloc2, libtcmalloc-minimal4),
preloaded. Settings are interleaved, each launched --repeats times; figures
are medians. bench/run.sh --allocators builds what it needs and calls this.

Prints markdown: samples/s and rank peak RSS per setting, then accel/C++
against the C++ reference with glibc's defaults and with its best setting,
the ratio that measures the engine rather than the allocator.
"""
import argparse
import datetime
import os
import statistics
import sys

import harness
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import results  # noqa: E402  (bench/results.py: the RESULTS.md it writes)

LIB = "/usr/lib/x86_64-linux-gnu/"
JEMALLOC = LIB + "libjemalloc.so.2"
TCMALLOC = LIB + "libtcmalloc_minimal.so.4"
# glibc keeping what is freed: no mmap per large block, no trimming.
KEEP_FREED = ("glibc.malloc.mmap_threshold=268435456:glibc.malloc.trim_threshold=4294967295:"
              "glibc.malloc.top_pad=268435456")

SETTINGS = [
    ("accel", "caching allocator (default)", {}),
    ("accel", "glibc", {"ACCEL_CPU_ALLOCATOR": "system"}),
    ("accel", "jemalloc", {"ACCEL_CPU_ALLOCATOR": "system", "LD_PRELOAD": JEMALLOC}),
    ("accel", "tcmalloc", {"ACCEL_CPU_ALLOCATOR": "system", "LD_PRELOAD": TCMALLOC}),
    ("C++", "glibc (default)", {}),
    ("C++", "glibc keeping freed memory", {"GLIBC_TUNABLES": KEEP_FREED}),
    ("C++", "jemalloc", {"LD_PRELOAD": JEMALLOC}),
    ("C++", "tcmalloc", {"LD_PRELOAD": TCMALLOC}),
]


def run(args):
    results = {}  # (workload, version, setting) -> [(samples/s, rank MiB)]
    for repeat in range(args.repeats):
        for name, (program, loop) in harness.WORKLOADS.items():
            if args.only and name not in args.only:
                continue
            for version, setting, env in SETTINGS:
                tag = f"{name} {version} {setting}, run {repeat + 1}"
                print(f"allocators: {tag}", file=sys.stderr, flush=True)
                saved = dict(os.environ)
                os.environ.update(env)
                try:
                    _, out, _ = harness.launch(harness.command(version, program, 1, loop, args.build), tag)
                finally:
                    os.environ.clear()
                    os.environ.update(saved)
                report = harness.bench_reports(out, 1, tag)[0]
                results.setdefault((name, version, setting), []).append(
                    (statistics.median(report["windows"]), report["vmhwm_kib"] / 1024))
    return results


def markdown(args, results):
    lines = [f"### CPU allocators, {datetime.date.today()}", "",
             f"`bench/run.sh --allocators --repeats {args.repeats}`; {harness.cpu_model()}, one rank, "
             "one intra-op thread; medians of the launches.", ""]
    workloads = [w for w in harness.WORKLOADS if not args.only or w in args.only]
    for name in workloads:
        lines += [f"**{name}**", "", "| version | allocator | samples/s | rank peak RSS MiB |", "|---|---|---|---|"]
        for version, setting, _ in SETTINGS:
            runs = results[(name, version, setting)]
            lines.append(f"| {version} | {setting} | {statistics.median(r[0] for r in runs):,.0f} "
                         f"| {statistics.median(r[1] for r in runs):.0f} |")
        lines.append("")
    lines += ["| workload | accel (caching) | best accel setting | C++ glibc default | best C++ setting "
              "| accel/C++ default | accel/C++ best |", "|---|---|---|---|---|---|---|"]
    for name in workloads:
        def sps(version, setting):
            return statistics.median(r[0] for r in results[(name, version, setting)])
        ours = sps("accel", SETTINGS[0][1])
        best_accel = max((s for v, s, _ in SETTINGS if v == "accel"), key=lambda s: sps("accel", s))
        cpp_default = sps("C++", "glibc (default)")
        best_cpp = max((s for v, s, _ in SETTINGS if v == "C++"), key=lambda s: sps("C++", s))
        lines.append(f"| {name} | {ours:,.0f} | {best_accel} ({sps('accel', best_accel):,.0f}) "
                     f"| {cpp_default:,.0f} | {best_cpp} ({sps('C++', best_cpp):,.0f}) "
                     f"| {ours / cpp_default:.2f} | {ours / sps('C++', best_cpp):.2f} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", required=True, help="the build folder (accel-run, bench/bench_*)")
    parser.add_argument("--repeats", type=int, default=3, help="launches of each setting (default 3)")
    parser.add_argument("--only", action="append", choices=list(harness.WORKLOADS), help="run only this workload")
    args = parser.parse_args()
    for library in (JEMALLOC, TCMALLOC):
        if not os.path.exists(library):
            sys.exit(f"allocators: {library} is missing; install libjemalloc2 and libtcmalloc-minimal4 "
                     "(scripts/setup.sh does)")
    print(markdown(args, run(args)))


if __name__ == "__main__":
    with results.published("bench/allocators", "CPU allocators"):
        main()

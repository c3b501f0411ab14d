#!/usr/bin/env bash
# Peak memory and time of one worker loading hostile safetensors headers of
# about 10 MB, against the same worker loading a one-tensor header (the baseline,
# run in the same invocation). Prints the extra peak memory per file byte.
#
#   bench/hostile/safetensors_headers.sh [build/accel-run]
set -euo pipefail
cd "$(dirname "$0")/../.."
run=${1:-build/accel-run}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

/usr/bin/python3 - "$dir" <<'PY'
import os, struct, sys
root = sys.argv[1]
def write(name, header, data_bytes):
    os.makedirs(f"{root}/{name}")
    with open(f"{root}/{name}/model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header.encode() + b"\0" * data_bytes)
write("baseline", '{"a":{"dtype":"U8","shape":[],"data_offsets":[0,1]}}', 1)
# Many one-byte tensors with short names: the most entries per byte.
entries, n = [], 0
while sum(map(len, entries)) < 10_000_000:
    entries.append('"%x":{"dtype":"U8","shape":[],"data_offsets":[%d,%d]}' % (n, n, n + 1))
    n += 1
write("many_tensors", "{" + ",".join(entries) + "}", n)
# One shape of five million zeros: the most values per byte.
write("long_shape", '{"x":{"dtype":"U8","shape":[' + ",".join(["0"] * 5_000_000) + '],"data_offsets":[0,0]}}', 0)
PY

cat > "$dir/load.lua" <<'LUA'
local acc = accel.Accelerator()
-- The model does not match: the load reads and checks the whole file, then refuses.
pcall(acc.load_model, acc, accel.nn.Linear(2, 2), arg[1])
LUA

peak() {  # prints "KB seconds"
  /usr/bin/time -f "%M %e" "$run" "$dir/load.lua" --nproc 1 --threads 1 -- "$dir/$1" 2>&1 >/dev/null | tail -1
}
read -r base_kb base_s < <(peak baseline)
echo "machine: $(nproc) cores, $(date -u +%Y-%m-%d); baseline worker peak ${base_kb} KB"
printf "%-14s %12s %14s %10s %12s\n" header "file bytes" "extra peak MB" seconds "bytes/byte"
for name in many_tensors long_shape; do
  read -r kb s < <(peak "$name")
  bytes=$(( $(stat -c %s "$dir/$name/model.safetensors") ))
  awk -v n="$name" -v b="$bytes" -v kb="$kb" -v base="$base_kb" -v s="$s" \
    'BEGIN { extra = (kb - base) * 1024; printf "%-14s %12d %14.0f %10.2f %12.1f\n", n, b, extra / 1e6, s, extra / b }'
done

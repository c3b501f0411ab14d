#!/bin/bash
# Big-model loading on a 2 GiB checkpoint (32 x Linear(4096, 4096), float32):
# reading it with dd, loading it whole with accel and with Accelerate, and
# running it with max_memory at a quarter of the model (the rest offloaded to
# disk); then estimate-memory against a measured training run.
#   bench/big_model/run.sh [BUILD_DIR] [WORK_DIR]
# Accelerate's side needs a Python with accelerate and safetensors next to
# Debian's torch (ACCELERATE_PYTHON, default BUILD_DIR/bigmodel-venv/bin/python).
set -e
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
work=${2:-/tmp/accel-big-model}
python=${ACCELERATE_PYTHON:-$build/bigmodel-venv/bin/python}
run="$build/accel-run"
mkdir -p "$work"

[ -f "$work/ckpt/model.safetensors.index.json" ] || [ -f "$work/ckpt/model.safetensors" ] ||
  "$run" "$here/save.lua" --nproc 1 -- "$work/ckpt"
files=$(ls "$work"/ckpt/*.safetensors)
bytes=$(cat $files | wc -c)
echo "checkpoint: $(echo $files | wc -w) file(s), $bytes bytes"

# Drops the checkpoint's pages from the page cache (posix_fadvise), so each
# load reads the disk.
uncache() { for f in $files; do dd if="$f" iflag=nocache count=0 status=none; done; }

uncache
start=$(date +%s.%N); cat $files | dd of=/dev/null bs=16M status=none; end=$(date +%s.%N)
echo "dd, cold: $(echo "$end - $start" | bc) s"
start=$(date +%s.%N); cat $files | dd of=/dev/null bs=16M status=none; end=$(date +%s.%N)
echo "dd, warm: $(echo "$end - $start" | bc) s"

quarter=$((bytes / 4))
for cache in cold warm; do
  [ $cache = cold ] && uncache
  echo "--- accel, whole model, $cache"; "$run" "$here/load.lua" --nproc 1 --threads 1 -- "$work/ckpt"
done
uncache
echo "--- accel, max_memory $quarter bytes (a quarter), cold"
"$run" "$here/load.lua" --nproc 1 --threads 1 -- "$work/ckpt" "$quarter"

if "$python" -c "import accelerate, safetensors" 2>/dev/null; then
  for cache in cold warm; do
    [ $cache = cold ] && uncache
    echo "--- Accelerate $("$python" -c 'import accelerate; print(accelerate.__version__)'), whole model, $cache"
    "$python" "$here/accelerate_load.py" "$work/ckpt"
  done
  uncache
  rm -rf "$work/offload"
  echo "--- Accelerate, max_memory $quarter bytes (a quarter), cold"
  "$python" "$here/accelerate_load.py" "$work/ckpt" "$quarter" "$work/offload"
else
  echo "--- Accelerate: not installed for $python; skipped"
fi

echo "--- estimate-memory against a measured training step"
BIG_MODEL_LAYERS=4 "$run" estimate-memory "$here/model.lua" --dtypes float32 bfloat16
for dtype in float32 bfloat16; do BIG_MODEL_LAYERS=4 "$run" "$here/train_memory.lua" --nproc 1 -- $dtype; done

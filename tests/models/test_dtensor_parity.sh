# accel's tensor parallelism side by side with PyTorch's own: a tiny Llama
# that transformers makes from a config with a fixed seed is trained 10
# AdamW steps by PyTorch 2.x from PyPI with DTensor's parallelize_module
# (ColwiseParallel / RowwiseParallel, 2 processes over Gloo on the CPU;
# dtensor_parity.py), and by accel on 2 ranks with llama's own plan, and
# again with sequence parallelism (llama's sp_plan; dtensor_parity.lua):
# every step's loss must equal DTensor's within 1e-5 (float32). Exits 77
# (skipped) where the PyPI venv cannot be made.
source "$(dirname "$0")/../launch/lib.sh"
source "$(dirname "$0")/transformers_venv.sh"
models_dir="$source_root/tests/models"

if out=$(timeout 600 "$oracle_python" "$models_dir/dtensor_parity.py" make "$work" 2>&1); then
  echo "$out"
  pass "PyTorch trained the tiny Llama in one process and with DTensor TP 2 over Gloo"
else
  err=""
  fail "PyTorch trained the tiny Llama in one process and with DTensor TP 2 over Gloo"
  finish; exit
fi

for mode in tp sp; do
  run_accel "$models_dir/dtensor_parity.lua" --nproc 2 --threads 1 -- "$work" "$mode"
  expect "accel trains it on 2 ranks ($mode)" [ "$status" -eq 0 ]
  echo "$out" >"$work/accel_$mode.json"
done
if out=$("$oracle_python" "$models_dir/dtensor_parity.py" compare "$work" "accel TP 2=$work/accel_tp.json" \
           "accel TP 2 + SP=$work/accel_sp.json" 2>&1); then
  echo "$out"
  pass "accel's losses equal DTensor's within 1e-5, with and without sequence parallelism"
else
  err=""
  fail "accel's losses equal DTensor's within 1e-5, with and without sequence parallelism"
fi
finish

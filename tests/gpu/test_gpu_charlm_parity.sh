# A 1-rank char-level transformer on the GPU equals PyTorch's own loop on
# the same GPU, from the same weights over the same batches: 20 AdamW steps
# whose losses agree within float32 rounding (relative 1e-4 after 20 steps
# of compounding). Needs a python3 whose torch has CUDA and safetensors.
source "$(dirname "$0")/lib.sh"
python=${ACCEL_TEST_PYTHON:-python3}
if ! "$python" -c 'import torch, safetensors; assert torch.cuda.is_available()' 2>/dev/null; then
  echo "SKIPPED: $python has no CUDA PyTorch with safetensors to compare with"
  exit 77
fi
run_accel "$source_root/tests/gpu/charlm_parity.lua" -- "$work/weights"
expect "accel's 20 steps ran on the GPU" [ "$(grep -c '^step .* cuda:0$' "$work/out")" -eq 20 ]
cp "$work/out" "$work/accel.out"
"$python" "$source_root/tests/gpu/charlm_parity.py" "$work/weights" >"$work/torch.out" 2>"$work/err"
out=$(cat "$work/torch.out")
err=$(cat "$work/err")
expect "PyTorch's 20 steps ran" [ "$(grep -c '^step ' "$work/torch.out")" -eq 20 ]
worst=$(awk 'NR == FNR { a[$2] = $3; next }
             { d = a[$2] - $3; if (d < 0) d = -d; r = d / $3; if (r > w) w = r }
             END { printf "%.3g", w }' "$work/accel.out" "$work/torch.out")
echo "largest relative loss difference over 20 steps: $worst"
paste "$work/accel.out" "$work/torch.out"
expect "every step's loss agrees within 1e-4 (relative)" awk -v w="$worst" 'BEGIN { exit !(w < 1e-4) }'
finish

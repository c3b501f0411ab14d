# accel's 4-bit quantization against bitsandbytes 0.50 on CPU: codes, absmax
# and nested statistics byte for byte on all-MiniLM-L6-v2's real weights and
# Linear4bit's outputs (quantize_parity.lua); a tiny Llama's 4-bit folder
# from transformers loads in accel with its logits, and accel's own 4-bit
# folder loads in transformers with accel's (four_bit_parity.lua,
# check_4bit_saved.py).
source "$(dirname "$0")/../launch/lib.sh"
source "$(dirname "$0")/transformers_venv.sh"
models_dir="$source_root/tests/models"

if out=$("$oracle_python" "$models_dir/make_quantize_reference.py" "$work/quantize" 2>&1); then
  pass "bitsandbytes quantized MiniLM's weights"
else
  err=""
  fail "bitsandbytes quantized MiniLM's weights"
  finish; exit
fi
timeout 300 "$accel_run" --threads 2 "$models_dir/quantize_parity.lua" -- "$work/quantize" >"$work/out" 2>"$work/err"
status=$?
out=$(cat "$work/out") err=$(cat "$work/err")
echo "$out"
expect "accel's 4-bit quantization equals bitsandbytes'" [ "$status" -eq 0 ]

if out=$("$oracle_python" "$models_dir/make_4bit_reference.py" "$work/llama" 2>&1); then
  pass "transformers saved a tiny Llama in 4 bits"
else
  err=""
  fail "transformers saved a tiny Llama in 4 bits"
  finish; exit
fi
timeout 300 "$accel_run" --threads 2 "$models_dir/four_bit_parity.lua" -- "$work/llama" >"$work/out" 2>"$work/err"
status=$?
out=$(cat "$work/out") err=$(cat "$work/err")
echo "$out"
expect "transformers' 4-bit folder loads in accel, and accel quantizes it alike" [ "$status" -eq 0 ]
out=$("$oracle_python" "$models_dir/check_4bit_saved.py" "$work/llama" 2>&1)
status=$?
err="$out"
echo "$out" | grep -v -i "warn\|kernels"
expect "accel's 4-bit folder loads in transformers with accel's logits" [ "$status" -eq 0 ]
finish

# QLoRA in accel against PEFT + bitsandbytes on CPU: from the same 4-bit
# base and initial adapter, 10 AdamW steps give PEFT's losses and trained
# adapter (make_qlora_reference.py, qlora_parity.lua).
source "$(dirname "$0")/../launch/lib.sh"
source "$(dirname "$0")/transformers_venv.sh"
models_dir="$source_root/tests/models"

if out=$("$oracle_python" "$models_dir/make_qlora_reference.py" "$work/qlora" 2>&1); then
  pass "PEFT + bitsandbytes ran 10 QLoRA steps"
else
  err=""
  fail "PEFT + bitsandbytes ran 10 QLoRA steps"
  finish; exit
fi
timeout 300 "$accel_run" --threads 2 "$models_dir/qlora_parity.lua" -- "$work/qlora" >"$work/out" 2>"$work/err"
status=$?
out=$(cat "$work/out") err=$(cat "$work/err")
echo "$out"
expect "accel's QLoRA gives PEFT's losses and adapter" [ "$status" -eq 0 ]
finish

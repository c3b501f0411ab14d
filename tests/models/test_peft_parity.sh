# accel.peft against Hugging Face PEFT and transformers: from the same tiny
# random checkpoints and PEFT's own initial adapters (make_peft_reference.py;
# nothing downloaded), 10 AdamW steps give PEFT's losses and adapter
# weights, and the logits of the trained, disabled, loaded and merged models
# equal PEFT's (peft_parity.lua); PEFT loads the adapters accel saves, and
# transformers the merged models, with the same logits (check_peft_saved.py).
source "$(dirname "$0")/../launch/lib.sh"
source "$(dirname "$0")/transformers_venv.sh"
models_dir="$source_root/tests/models"

if "$oracle_python" "$models_dir/make_peft_reference.py" "$work/ref" >"$work/make.log" 2>&1; then
  pass "PEFT wrote the base checkpoints, its adapters and its training's results"
else
  out=$(cat "$work/make.log") err=""
  fail "PEFT wrote the base checkpoints, its adapters and its training's results"
  finish; exit
fi

timeout 240 "$accel_run" --threads 2 "$models_dir/peft_parity.lua" -- "$work/ref" "$work/saved" >"$work/out" 2>"$work/err"
status=$?
out=$(cat "$work/out") err=$(cat "$work/err")
echo "$out"
expect "accel.peft trains, disables, loads and merges as PEFT does for every case" [ "$status" -eq 0 ]

if out=$("$oracle_python" "$models_dir/check_peft_saved.py" "$work/ref" "$work/saved" 2>&1); then
  echo "$out" | grep -v -i warn
  pass "PEFT loads accel's adapters, and transformers its merged models, with PEFT's logits"
else
  err=""
  fail "PEFT loads accel's adapters, and transformers its merged models, with PEFT's logits"
fi
finish

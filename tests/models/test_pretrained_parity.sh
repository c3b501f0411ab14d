# accel.models against Hugging Face transformers: tiny random checkpoints
# that transformers makes from configs with fixed seeds (make_checkpoints.py;
# nothing downloaded), for every architecture and variant (grouped-query
# attention, Llama 3 and linear rope scaling, sliding window, tied
# embeddings, biases, experts, GPT-2's Conv1D, BERT). accel's logits, loss,
# greedy tokens and hidden states must equal transformers' (parity.lua),
# and the folders accel's save_pretrained writes must load in transformers
# with the same outputs (check_saved.py).
source "$(dirname "$0")/../launch/lib.sh"
source "$(dirname "$0")/transformers_venv.sh"
models_dir="$source_root/tests/models"

if "$oracle_python" "$models_dir/make_checkpoints.py" "$work/ref" >"$work/make.log" 2>&1; then
  pass "transformers wrote the tiny checkpoints and their references"
else
  out=$(cat "$work/make.log") err=""
  fail "transformers wrote the tiny checkpoints and their references"
  finish; exit
fi

timeout 240 "$accel_run" --threads 2 "$models_dir/parity.lua" -- "$work/ref" "$work/saved" 2 >"$work/out" 2>"$work/err"
status=$?
out=$(cat "$work/out") err=$(cat "$work/err")
echo "$out"
expect "accel's outputs equal transformers' for every case" [ "$status" -eq 0 ]

while read -r case; do
  if out=$("$oracle_python" "$models_dir/check_saved.py" "$work/ref/$case" "$work/saved/$case" 2>&1); then
    pass "transformers loads accel's save_pretrained of $case with the same outputs"
  else
    err=""
    fail "transformers loads accel's save_pretrained of $case with the same outputs"
  fi
done <"$work/ref/cases.txt"
finish

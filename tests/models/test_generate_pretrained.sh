# recipes/generate_pretrained.lua end to end, as Accelerate's distributed
# inference: on 2 processes, with accel's tokenizer and a tiny Llama that
# transformers made with its own tokenizer (make_generate_reference.py), the
# gathered texts equal transformers' greedy generate and decode; and again
# with device_map = "auto" and most of the model offloaded to disk.
source "$(dirname "$0")/../launch/lib.sh"
source "$(dirname "$0")/transformers_venv.sh"
recipe="$source_root/recipes/generate_pretrained.lua"

if out=$("$oracle_python" "$source_root/tests/models/make_generate_reference.py" "$recipe" "$work/ref" 12 2>&1); then
  pass "transformers made the model and generated the reference texts"
else
  err=""
  fail "transformers made the model and generated the reference texts"
  finish; exit
fi
expected=$(cat "$work/ref/expected.txt")

run_accel "$recipe" --nproc 2 --threads 1 -- "$work/ref/model" "" 12
expect "the recipe runs on 2 processes" [ "$status" -eq 0 ]
expect "its gathered texts equal transformers'" [ "$out" = "$expected" ]

run_accel "$recipe" --nproc 2 --threads 1 -- "$work/ref/model" 60000 12
expect "the recipe runs with most of the model offloaded to disk" [ "$status" -eq 0 ]
expect "with the same texts" [ "$out" = "$expected" ]
finish

# accel-run --watch keeps what from_pretrained loaded in the warm workers:
# a rerun after an edit is handed the weights already in memory (the
# worker's kept_weights count grows), never a previous run's changes to
# them (the recipe adds 1 to a weight in place each run, and every run sees
# the file's values), and a checkpoint saved again is read again.
source "$(dirname "$0")/lib.sh"
proj="$work/proj"
mkdir -p "$proj"
cd "$proj" || exit 1

make_checkpoint() {  # make_checkpoint SEED: a tiny Llama folder in $work/ckpt
  cat >"$work/make.lua" <<LUA
accel.set_seed($1)
accel.models.from_config({ model_type = "llama", vocab_size = 64, hidden_size = 32, intermediate_size = 64,
  num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2 }):save_pretrained("$work/ckpt.new")
LUA
  "$accel_run" --threads 1 "$work/make.lua" >/dev/null 2>&1 || return 1
  rm -rf "$work/ckpt" && mv "$work/ckpt.new" "$work/ckpt"
}
# An editor's save: a new file renamed over the old one.
save_recipe() {
  { cat "$source_root/tests/launch/watch_pretrained_recipe.lua"; echo "-- edit $1"; } >"$proj/gen.tmp"
  mv "$proj/gen.tmp" "$proj/gen.lua"
}
wait_runs() {  # wait_runs N: until the launcher has ended N runs (30 s at most)
  for _ in $(seq 300); do
    [ "$(grep -c -E '^accel-run: (run [0-9]+ finished|rank [0-9]+ failed in run)' "$work/err")" -ge "$1" ] && return 0
    sleep 0.1
  done
  return 1
}
# rank0 FIELD RUN: rank 0's FIELD in its RUN-th report.
rank0() { grep "^RANK 0 SUM" "$work/out" | sed -n "${2}p" | awk -v f="$1" '{ for (i = 1; i < NF; i++) if ($i == f) print $(i + 1) }'; }

expect "a tiny pretrained folder is written" make_checkpoint 1
save_recipe 1
set -m
"$accel_run" gen.lua --watch --nproc 2 --threads 1 -- "$work/ckpt" >"$work/out" 2>"$work/err" &
launcher=$!
set +m
wait_runs 1; out=$(cat "$work/out"); err=$(cat "$work/err")
expect "the first run loads and generates on both ranks" [ "$(grep -c 'TOKENS 5' "$work/out")" -eq 2 ]
expect "the first run was handed no kept weights" [ "$(rank0 FOUND 1)" = 0 ]
first_sum=$(rank0 SUM 1)

save_recipe 2
wait_runs 2; out=$(cat "$work/out"); err=$(cat "$work/err")
expect "the rerun finishes" contains "$err" "accel-run: run 2 finished"
expect "the rerun is handed the weights the first run loaded" [ "$(rank0 FOUND 2)" -gt 0 ]
expect "the rerun sees the file's values, not the first run's change" [ "$(rank0 SUM 2)" = "$first_sum" ]

save_recipe 3
wait_runs 3; out=$(cat "$work/out"); err=$(cat "$work/err")
expect "a third run sees the file's values too" [ "$(rank0 SUM 3)" = "$first_sum" ]

expect "the checkpoint is saved again with other weights" make_checkpoint 2
found_before=$(rank0 FOUND 3)
save_recipe 4
wait_runs 4; out=$(cat "$work/out"); err=$(cat "$work/err")
expect "a checkpoint saved again is read again" [ "$(rank0 SUM 4)" != "$first_sum" ]
expect "and none of the old file's kept weights is handed out" [ "$(rank0 FOUND 4)" = "$found_before" ]

kill -INT "$launcher" 2>/dev/null
wait "$launcher" 2>/dev/null
expect "no process outlives the launcher" no_survivors
finish

# accel-run serve and submit (docs/live-runs.md): ten short training runs
# submitted in a row to warm workers (six to a serve of 2 ranks, four to
# one of 1) each end with the exit status, the output and the saved weights
# (byte for byte) of the same run started cold; a run that raises on one
# rank gives the cold run's exit status and its error, and the next run
# still runs; submit without a serve says so; every process of a serve
# ends when it is stopped, and its live folder goes with it.
source "$(dirname "$0")/lib.sh" "$@"
cd "$work" || exit 1
cp "$source_root/tests/launch/serve_recipe.lua" recipe.lua

run_accel submit recipe.lua -- none 1 1
expect "submit with no serve fails, saying so ($err)" \
  bash -c '[ "$1" -eq 1 ] && [[ $2 == *"no accel-run serve was started from"* ]]' _ "$status" "$err"

# Every process under the serve's: it, its workers and their guardian.
descendants() {
  local pid
  for pid in $(pgrep -P "$1"); do echo "$pid"; descendants "$pid"; done
}

serve() {  # serve NPROC: a serve in the background ($serve_pid), once it takes submissions
  "$accel_run" serve --nproc "$1" --threads 1 >"serve-$1.out" 2>"serve-$1.err" &
  serve_pid=$!
  for _ in $(seq 200); do
    grep -q "serving on" "serve-$1.err" && return 0
    sleep 0.05
  done
  return 1
}

stop_serve() {  # stop_serve NPROC
  local pids
  pids=$(descendants "$serve_pid")
  kill -TERM "$serve_pid"
  wait "$serve_pid"
  sleep 0.2
  local left=""
  for pid in $pids; do kill -0 "$pid" 2>/dev/null && left="$left $pid"; done
  expect "$1 rank(s): every process of the serve ended with it (left:$left)" [ -z "$left" ]
  run_accel attach --list
  expect "$1 rank(s): the serve's live folder is gone ($out)" bash -c '[[ $1 != *"$2"* ]]' _ "$out" "$work"
}

# submit_and_compare NPROC NAME SEED STEPS [fail]: the run submitted, then cold.
submit_and_compare() {
  local nproc=$1 name=$2; shift 2
  timeout 60 "$accel_run" submit recipe.lua -- "served-$name" "$@" >"served-$name.out" 2>"served-$name.err"
  local served=$?
  timeout 60 "$accel_run" recipe.lua --nproc "$nproc" --threads 1 -- "cold-$name" "$@" >"cold-$name.out" 2>"cold-$name.err"
  local cold=$?
  out=$(cat "served-$name.out"); err=$(cat "served-$name.err")
  expect "$name: the exit status is the cold run's ($served, cold $cold)" [ "$served" -eq "$cold" ]
  if [ "${3:-}" = fail ]; then
    expect "$name: the error reaches the submitter" grep -q "serve_recipe: asked to fail" "served-$name.err"
    return
  fi
  expect "$name: exit status 0" [ "$served" -eq 0 ]
  # Lines of different ranks interleave at random, cold as served.
  expect "$name: the output is the cold run's" cmp -s <(sort "served-$name.out") <(sort "cold-$name.out")
  expect "$name: nothing of an earlier run is left" grep -q "left by an earlier run: global nil, module nil" "served-$name.out"
  expect "$name: the saved weights are the cold run's, byte for byte" \
    cmp "served-$name/model.safetensors" "cold-$name/model.safetensors"
}

expect "a serve of 2 ranks starts" serve 2
submit_and_compare 2 a 1 3
submit_and_compare 2 b 2 5
submit_and_compare 2 c 3 4
submit_and_compare 2 failing 4 3 fail
submit_and_compare 2 d 4 3
submit_and_compare 2 e 1 3
submit_and_compare 2 f 7 6
expect "the serve reported the failed run and went on" grep -q "failed (exit status 1)" serve-2.err
# Loaded checkpoints stay warm: the second run is handed what the first
# loaded, and its values are the file's, though the first changed them in
# place (tests/launch/watch_pretrained_recipe.lua).
cat >make.lua <<LUA
accel.set_seed(1)
accel.models.from_config({ model_type = "llama", vocab_size = 64, hidden_size = 32, intermediate_size = 64,
  num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2 }):save_pretrained("$work/ckpt")
LUA
"$accel_run" --threads 1 make.lua >/dev/null 2>&1
cp "$source_root/tests/launch/watch_pretrained_recipe.lua" pretrained.lua
for n in 1 2; do timeout 60 "$accel_run" submit pretrained.lua -- "$work/ckpt" >"pretrained-$n.out" 2>&1; done
field() { grep "^RANK 0 SUM" "pretrained-$1.out" | awk -v f="$2" '{ for (i = 1; i < NF; i++) if ($i == f) print $(i + 1) }'; }
out=$(cat pretrained-*.out)
expect "the first run loads the checkpoint itself" [ "$(field 1 FOUND)" = 0 ]
expect "the second is handed the weights the first loaded" [ "$(field 2 FOUND)" -gt 0 ]
expect "with the file's values, not the first run's change" [ "$(field 2 SUM)" = "$(field 1 SUM)" ]
# And tokenizers: the second run is handed the first's, which encodes alike.
cp "$source_root/tests/tokenizers/fixtures/byte_level/tokenizer.json" "$work/ckpt/"
cat >tokenize.lua <<'LUA'
local tok = accel.tokenizers.from_file(arg[1] .. "/tokenizer.json")
local ids = tok:encode("Warm workers serve a queue.")
local kept = require("accel.core").formats.kept_weights()
print(string.format("IDS %s TOKENIZERS %d", table.concat(ids, ","), kept.tokenizers_found))
LUA
for n in 1 2; do timeout 60 "$accel_run" submit tokenize.lua -- "$work/ckpt" >"tokenize-$n.out" 2>&1; done
out=$(cat tokenize-*.out)
ids() { sed -n 's/^IDS \([^ ]*\) .*/\1/p' "tokenize-$1.out" | sort -u; }
kept_tokenizers() { sed -n 's/.* TOKENIZERS \([0-9]*\)$/\1/p' "tokenize-$1.out" | sort -u; }
expect "the second run is handed the tokenizer the first read" \
  bash -c '[ "$1" -gt "$2" ]' _ "$(kept_tokenizers 2)" "$(kept_tokenizers 1)"
expect "and it encodes as the first did" bash -c '[ -n "$1" ] && [ "$1" = "$2" ]' _ "$(ids 1)" "$(ids 2)"
stop_serve 2

expect "a serve of 1 rank starts" serve 1
submit_and_compare 1 g 1 3
submit_and_compare 1 h 5 4
submit_and_compare 1 i 6 2
submit_and_compare 1 j 1 3
expect "runs g and j, alike, save the same weights" cmp served-g/model.safetensors served-j/model.safetensors
stop_serve 1
finish

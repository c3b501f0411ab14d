# `accel-run estimate-memory MODEL.lua` prints the largest layer, the total
# size and AdamW's model states per zero stage, per dtype, from a model built
# without memory; bad arguments are refused by name.
source "$(dirname "$0")/lib.sh"
model="$source_root/tests/launch/estimate_memory_model.lua"

row() { grep "^$1 " <<<"$out"; }
row_has() {  # row_has DTYPE FIELD...
  local line; line=$(row "$1"); shift
  for field in "$@"; do [[ "$line" == *"$field"* ]] || return 1; done
}

run_accel estimate-memory "$model" --num-processes 4
expect "estimate-memory exits 0" [ "$status" -eq 0 ]
expect "it counts the parameters" contains "$out" "1501500 parameters"
# float32: layer 1,001,000 x 4 B; total 6,006,000 B; stage 0 16 B a parameter,
# stage 1 8 + 8/4, stage 2 4 + 12/4, stage 3 16/4 plus the largest layer.
expect "float32: largest layer, total and the four stages" \
  row_has float32 "3.82 MiB" "5.73 MiB" "22.91 MiB" "14.32 MiB" "10.02 MiB" "9.55 MiB"
expect "bfloat16 halves every figure" row_has bfloat16 "1.91 MiB" "2.86 MiB" "11.46 MiB" "7.16 MiB"
expect "the default dtypes include float16" row_has float16 "2.86 MiB"

run_accel estimate-memory "$model" --dtypes bfloat16
expect "--dtypes limits the rows" [ "$status" -eq 0 -a -z "$(row float32)" -a -n "$(row bfloat16)" ]

run_accel estimate-memory "$model" --dtypes int3
expect "an unknown dtype is refused by name" [ "$status" -ne 0 ]
expect "the error names the dtype" contains "$err" "unknown dtype int3"

echo 'return 42' >"$work/not_a_builder.lua"
run_accel estimate-memory "$work/not_a_builder.lua"
expect "a file that returns no function is refused" contains "$err" "must return a function that builds the model"

# Compiled bytecode of a model file is refused before a byte of it runs.
cat >"$work/compile.lua" <<LUA
local chunk = assert(loadfile("$model"))
local f = assert(io.open("$work/compiled.lua", "wb"))
f:write(string.dump(chunk))
f:close()
LUA
timeout 60 "$accel_run" "$work/compile.lua" --threads 1 >/dev/null 2>&1
run_accel estimate-memory "$work/compiled.lua"
expect "a model file of bytecode is refused, named" \
  contains "$err" "$work/compiled.lua is compiled Lua bytecode; estimate-memory runs model files as Lua source only"
expect "with a failing exit status" [ "$status" -ne 0 ]

finish

# The config file, end to end: each mistake (bad YAML, unknown key with a
# did-you-mean, wrong type, bad value) is refused before any worker starts,
# naming the file, the line and the key; a good file sets the run (ranks,
# the Accelerator's mixed precision), the command line overrides it, and it
# is found through --config, $ACCEL_CONFIG_FILE or the default path that
# `accel-run config` writes, interactively or with --default.
source "$(dirname "$0")/lib.sh"
export XDG_CONFIG_HOME="$work/xdg"
unset ACCEL_CONFIG_FILE

cat >"$work/show.lua" <<'LUA'
local acc = accel.Accelerator{}
io.open(arg[1] .. "/ran." .. acc.process_index, "w"):close()
acc:print(string.format("ranks %d precision %s accumulation %d", acc.num_processes,
                        acc.mixed_precision, acc.gradient_accumulation_steps))
LUA
cat >"$work/own_precision.lua" <<'LUA'
local acc = accel.Accelerator{ mixed_precision = "no" }
acc:print("precision " .. acc.mixed_precision)
LUA

# refused NAME YAML WANTED: a config holding YAML makes accel-run exit 2 with
# WANTED on stderr, and no rank runs.
refused() {
  local name=$1 yaml=$2 wanted=$3
  printf '%s' "$yaml" >"$work/$name.yaml"
  rm -f "$work"/ran.*
  run_accel --config "$work/$name.yaml" "$work/show.lua" -- "$work"
  expect "$name: exit code 2" [ "$status" -eq 2 ]
  expect "$name: names file, line and key" contains "$err" "$wanted"
  expect "$name: no rank ran" [ -z "$(ls "$work"/ran.* 2>/dev/null)" ]
}
refused bad_yaml $'num_processes: 2\nbackend: [gloo\n' \
  "accel-run: error: $work/bad_yaml.yaml:3:1: malformed YAML"
refused unknown_key $'num_processes: 2\ngradient_acumulation_steps: 4\n' \
  "$work/unknown_key.yaml:2: unknown key 'gradient_acumulation_steps' (did you mean 'gradient_accumulation_steps'?)"
refused wrong_type $'num_processes: 2\ndebug: 3\n' \
  "$work/wrong_type.yaml:2: key 'debug' expects true or false, got '3'"
refused quoted_number $'num_processes: "2"\n' \
  "$work/quoted_number.yaml:1: key 'num_processes' expects an integer from 1 to 1048576, got the string '2'"
refused bad_choice $'mixed_precision: bf61\n' \
  "$work/bad_choice.yaml:1: key 'mixed_precision' expects one of no, bf16, fp16, fp8, got 'bf61' (did you mean 'bf16'?)"
refused not_a_map $'- num_processes\n' \
  "$work/not_a_map.yaml:1: the config must be a mapping of keys to values"

printf 'num_processes: 3\nmixed_precision: bf16\ngradient_accumulation_steps: 2\n' >"$work/good.yaml"
run_accel --config "$work/good.yaml" "$work/show.lua" -- "$work"
expect "a good config sets the ranks and the Accelerator's defaults" \
  contains "$out" "ranks 3 precision bf16 accumulation 2"
run_accel --config "$work/good.yaml" "$work/show.lua" --nproc 2 --mixed-precision no -- "$work"
expect "the command line overrides the config" contains "$out" "ranks 2 precision no accumulation 2"
run_accel --config "$work/good.yaml" "$work/own_precision.lua" --nproc 1
expect "what the recipe sets wins over the config" contains "$out" "precision no"
ACCEL_CONFIG_FILE="$work/good.yaml" run_accel "$work/show.lua" -- "$work"
expect "\$ACCEL_CONFIG_FILE is read" contains "$out" "ranks 3 precision bf16"
ACCEL_CONFIG_FILE="$work/absent.yaml" run_accel "$work/show.lua" -- "$work"
expect "a missing \$ACCEL_CONFIG_FILE is an error" contains "$err" "cannot read the config file '$work/absent.yaml'"

# accel-run config --default writes the default file, which is then in force.
run_accel config --default
expect "config --default exits 0" [ "$status" -eq 0 ]
expect "config --default writes under XDG_CONFIG_HOME" [ -f "$XDG_CONFIG_HOME/accel/default_config.yaml" ]
run_accel "$work/show.lua" -- "$work"
expect "the default config's run" contains "$out" "ranks 1 precision no accumulation 1"

# Interactive: answers on stdin, a wrong answer asked again, the rest defaults.
answers=$'1\nfour\n2\n\nbf16\n'
timeout 20 "$accel_run" config --config "$work/asked.yaml" <<<"$answers" >"$work/out" 2>"$work/err"
status=$?; out=$(cat "$work/out"); err=$(cat "$work/err")
expect "interactive config exits 0" [ "$status" -eq 0 ]
expect "a wrong answer is explained and asked again" \
  contains "$out" "expects an integer from 1 to 1048576, got 'four'; try again"
expect "the answers are written" grep -qx "num_processes: 2" "$work/asked.yaml"
expect "mixed precision is written quoted" grep -qx "mixed_precision: 'bf16'" "$work/asked.yaml"
expect "a default answer is written" grep -qx "backend: gloo" "$work/asked.yaml"
run_accel --config "$work/asked.yaml" "$work/show.lua" -- "$work"
expect "the written config runs" contains "$out" "ranks 2 precision bf16"
timeout 20 "$accel_run" config --config "$work/uneven.yaml" <<<$'2\n1\n10.0.0.1\n29500\n3\n' >"$work/out" 2>"$work/err"
expect "answers that do not fit together are refused" [ $? -eq 2 ]
expect "and no file is left" [ ! -e "$work/uneven.yaml" ]

# A pasted 2 MB answer is refused without being printed back.
huge=$(head -c 2000000 /dev/zero | tr '\0' 'x')
timeout 20 "$accel_run" config --config "$work/huge.yaml" <<<"$huge"$'\n' >"$work/out" 2>"$work/err"
out=$(cat "$work/out"); err=$(cat "$work/err")
expect "a 2 MB answer is refused with its size" contains "$out" "got 'xxxxxxxx"
expect "and not printed back in full ($(wc -c <"$work/out") bytes printed)" test "$(wc -c <"$work/out")" -lt 4000
# (An argument holds at most 128 KiB.)
run_accel "$work/show.lua" --num-processes "${huge:0:100000}"
expect "so is a 100 kB option value" contains "$err" "...' (100000 bytes)"
expect "without printing it back" test "${#err}" -lt 4000

# A FIFO as the config file: read when written to, as a shell's <(...) is;
# refused in time when nobody writes to it.
run_accel --config <(printf 'num_processes: 2\n') "$work/show.lua" -- "$work"
expect "a config from <(...) is read" contains "$out" "ranks 2"
mkfifo "$work/config.fifo"
run_accel --config "$work/config.fifo" "$work/show.lua" -- "$work"
expect "a FIFO nobody writes to is refused" [ "$status" -eq 2 ]
expect "within seconds ($elapsed s)" [ "$elapsed" -lt 15 ]
expect "saying why" contains "$err" "the config file '$work/config.fifo' gave nothing to read within 5 s (a FIFO nobody writes to?)"

finish

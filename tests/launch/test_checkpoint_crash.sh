# Crash safety: a run killed with SIGKILL in the middle of a save (the
# fault-injection point between the data files and the manifest) leaves
# the previous checkpoint intact; acc:load_state() picks it, and the run
# resumed from it matches an uninterrupted one.
source "$(dirname "$0")/lib.sh"
recipe="$source_root/tests/launch/checkpoint_recipe.lua"

run_accel "$recipe" --nproc 2 -- "$work/full"
cp "$work/out" "$work/full.out"
expect "uninterrupted run exits 0" [ "$status" -eq 0 ]

ACCEL_FAULT_INJECT=checkpoint-before-manifest@2 run_accel "$recipe" --nproc 2 -- "$work/crash"
expect "the second save is killed: exit 137" [ "$status" -eq 137 ]
expect "the launcher names SIGKILL on rank 0" contains "$err" "rank 0 was killed by signal 9 (SIGKILL"
expect "the killed save stopped after step 20" grep -q "^step 20 " "$work/out"
expect "the killed save left its data files in the temporary folder" \
  [ -f "$work/crash/checkpoints/.checkpoint_1.tmp/model.safetensors" ]
expect "the killed save wrote no manifest" [ ! -e "$work/crash/checkpoints/.checkpoint_1.tmp/manifest.json" ]
expect "no checkpoint_1 appeared" [ ! -e "$work/crash/checkpoints/checkpoint_1" ]
expect "the step-10 checkpoint is complete" [ -f "$work/crash/checkpoints/checkpoint_0/manifest.json" ]

run_accel "$recipe" --nproc 2 -- "$work/crash" 0 resume
cp "$work/out" "$work/resumed.out"
expect "the resumed run exits 0" [ "$status" -eq 0 ]
expect "load_state() picked the step-10 checkpoint" contains "$out" "resumed from $work/crash/checkpoints/checkpoint_0"
expect "steps 11 to 40 match the uninterrupted run exactly" \
  diff <(awk '$1 == "step" && $2 > 10' "$work/full.out") <(awk '$1 == "step"' "$work/resumed.out")
stale_replaced() {
  [ -f "$work/crash/checkpoints/checkpoint_1/manifest.json" ] && [ ! -e "$work/crash/checkpoints/.checkpoint_1.tmp" ]
}
expect "the resumed run's save replaced the stale temporary folder" stale_replaced

finish

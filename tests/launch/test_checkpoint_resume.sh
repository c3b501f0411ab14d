# Exact resume: a 2-rank run stopped by a failure at step 25 and resumed
# (a fresh accel-run calling acc:load_state()) from its step-20 checkpoint
# gives the same per-step losses and learning rates for steps 21 to 40 as
# an uninterrupted run, within 1e-6. The recipe shuffles, uses dropout,
# math.random, AdamW and a cosine schedule, so every saved generator,
# counter and position matters.
source "$(dirname "$0")/lib.sh"
recipe="$source_root/tests/launch/checkpoint_recipe.lua"

# "step K ..." lines of an output file, steps FROM to 40.
steps_from() { awk -v from="$2" '$1 == "step" && $2 >= from' "$1"; }

# Two step listings agree: same steps, every number within 1e-6 (relative
# above 1).
same_numbers() {
  awk 'NR == FNR { a[FNR] = $0; n = FNR; next }
       { if (!(FNR in a)) exit 1
         split(a[FNR], x, " "); m = split($0, y, " ")
         for (i = 1; i <= m; i++) {
           if (x[i] == y[i]) continue
           d = x[i] - y[i]; if (d < 0) d = -d
           s = y[i] < 0 ? -y[i] : y[i]; if (s < 1) s = 1
           if (d > 1e-6 * s) exit 1
         }
         seen = FNR }
       END { exit !(seen == n && n > 0) }' "$1" "$2"
}

run_accel "$recipe" --nproc 2 -- "$work/full"
cp "$work/out" "$work/full.out"
expect "uninterrupted run exits 0" [ "$status" -eq 0 ]
expect "uninterrupted run reaches step 40" grep -q "^step 40 " "$work/full.out"
expect "total_limit = 3 keeps the newest three checkpoints" \
  [ "$(ls "$work/full/checkpoints" | tr '\n' ' ')" = "checkpoint_1 checkpoint_2 checkpoint_3 " ]

run_accel "$recipe" --nproc 2 -- "$work/resumed" 25
expect "the run failing at step 25 exits 1" [ "$status" -eq 1 ]
expect "the failure is reported" contains "$err" "injected failure after step 25"
expect "steps 1 to 25 ran before the failure" grep -q "^step 25 " "$work/out"
expect "the first 25 steps match the uninterrupted run" \
  same_numbers <(awk '$1 == "step" && $2 <= 25' "$work/full.out") <(steps_from "$work/out" 1)

run_accel "$recipe" --nproc 2 -- "$work/resumed" 0 resume
cp "$work/out" "$work/resumed.out"
expect "the resumed run exits 0" [ "$status" -eq 0 ]
expect "load_state() picked the step-20 checkpoint" contains "$out" "resumed from $work/resumed/checkpoints/checkpoint_1"
expect "the resumed run starts at step 21" [ "$(awk '$1 == "step" { print $2; exit }' "$work/resumed.out")" = "21" ]
expect "steps 21 to 40 match the uninterrupted run within 1e-6" \
  same_numbers <(steps_from "$work/full.out" 21) <(steps_from "$work/resumed.out" 21)
expect "the resumed run saves its next checkpoint as checkpoint_2" \
  [ -f "$work/resumed/checkpoints/checkpoint_2/manifest.json" ]

finish

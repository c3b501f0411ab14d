# A save_state or load_state that fails on one rank only fails on every
# rank together, catchably, and the run goes on: further saves, loads and
# collectives work and it exits 0 at once, not at the collective timeout
# (the recipe's own checks are in checkpoint_agreement.lua).
source "$(dirname "$0")/lib.sh"
recipe="$source_root/tests/launch/checkpoint_agreement.lua"

mkdir "$work/run"
run_accel "$recipe" --nproc 2 --threads 1 --timeout 20 -- "$work/run"
expect "the run exits 0" [ "$status" -eq 0 ]
expect "well before the collective timeout" [ "$elapsed" -lt 15 ]
expect "every check passed" contains "$out" "checkpoint agreement: "
expect "rank 1 went on to the end too" contains "$out" "[rank 1] rank 1 went on to the end"
expect "no process left" no_survivors

finish

# acc:spike_guard (docs/live-runs.md): a batch made to explode the loss on
# one rank is skipped on every rank, and the run ends on the weights of a
# run that never saw it, bit for bit, on 1 and 2 ranks. "rollback" to the
# oldest of 1 or 3 snapshots does the same with dropout in the model: the
# weights, optimizer, schedule, generators and loader position go back, the
# batches since the snapshot are read again, the spiked one never, and the
# steps take the reference's batches (none read twice, none left out), also
# with num_workers = 2 (the reader ahead of the loop starts again).
source "$(dirname "$0")/lib.sh" "$@"
recipe=$source_root/tests/launch/spike_recipe.lua

for nproc in 1 2; do
  for action in skip rollback; do
    run_accel "$recipe" --nproc $nproc -- "$work/reference-$action-$nproc" reference $action
    expect "$nproc rank(s): the reference run takes 59 steps" contains "$out" "updates 59"
  done
  for run in "skip 1 0" "rollback 1 0" "rollback 3 0" "rollback 3 2"; do
    set -- $run
    action=$1 dir=$work/$1-$2-$3-$nproc reference=$work/reference-$1-$nproc
    run_accel "$recipe" --nproc $nproc -- "$dir" guard $run
    expect "$nproc rank(s), $run: the spike is reported ($err)" contains "$out" "spike_guard: step 30's loss"
    expect "$nproc rank(s), $run: every rank dropped the step" contains "$out" "updates 59"
    expect "$nproc rank(s), $run: the steps took the reference's batches" \
      cmp "$reference/batches.txt" "$dir/batches.txt"
    expect "$nproc rank(s), $run: the weights are those of a run that never saw the batch" \
      cmp "$reference/model.safetensors" "$dir/model.safetensors"
  done
  expect "$nproc rank(s): rollback 3 went back to the oldest snapshot" contains "$out" "rolled back to step 27"
done
run_accel "$recipe" --nproc 1 -- "$work/bad" guard sideways
expect "a wrong action is refused, naming it" contains "$err" "action must be 'skip' or 'rollback', got sideways"
finish

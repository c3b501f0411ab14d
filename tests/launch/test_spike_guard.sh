# acc:spike_guard (docs/live-runs.md): a batch made to explode the loss on
# one rank is skipped on every rank, and the run ends on the weights of a
# run that never saw it, bit for bit, on 1 and 2 ranks; "rollback" to the
# last snapshot does the same.
source "$(dirname "$0")/lib.sh" "$@"
recipe=$source_root/tests/launch/spike_recipe.lua

for nproc in 1 2; do
  run_accel "$recipe" --nproc $nproc -- "$work/reference-$nproc" reference
  expect "$nproc rank(s): the reference run takes 59 steps" contains "$out" "updates 59"
  for action in skip rollback; do
    run_accel "$recipe" --nproc $nproc -- "$work/$action-$nproc" guard $action
    expect "$nproc rank(s), $action: the spike is reported ($err)" contains "$out" "spike_guard: step 30's loss"
    expect "$nproc rank(s), $action: every rank dropped the step" contains "$out" "updates 59"
    expect "$nproc rank(s), $action: the weights are those of a run that never saw the batch" \
      cmp "$work/reference-$nproc/model.safetensors" "$work/$action-$nproc/model.safetensors"
  done
done
run_accel "$recipe" --nproc 1 -- "$work/bad" guard sideways
expect "a wrong action is refused, naming it" contains "$err" "action must be 'skip' or 'rollback', got sideways"
finish

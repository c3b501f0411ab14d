# acc:save_state(dir, {async = true}) (docs/live-runs.md): the same files,
# byte for byte, as a synchronous save of the same state, though training
# changes the weights while they are written (1 and 2 ranks); a rank killed
# with SIGKILL while it writes (ACCEL_FAULT_INJECT) leaves the checkpoint before loadable and
# none half made.
source "$(dirname "$0")/lib.sh" "$@"
recipe=$source_root/tests/launch/async_save_recipe.lua

same_files() {
  [ "$(cd "$1/sync" && ls -A | sort)" = "$(cd "$1/async" && ls -A | sort)" ] || return 1
  for f in "$1"/sync/*; do cmp "$f" "$1/async/$(basename "$f")" || return 1; done
}
for nproc in 1 2; do
  run_accel "$recipe" --nproc $nproc -- "$work/same-$nproc" same
  expect "$nproc rank(s): the asynchronous save ends well ($err)" contains "$out" "waited for $work/same-$nproc/async"
  expect "$nproc rank(s): it wrote the synchronous save's files, byte for byte" same_files "$work/same-$nproc"
done

# The rank dies by SIGKILL after its background writer wrote its second file.
ACCEL_FAULT_INJECT=checkpoint-async-write@2 run_accel "$recipe" --nproc 1 -- "$work/crash" crash
expect "the rank was killed while its checkpoint was written ($err)" contains "$err" "signal 9"
expect "it trained on after staging the save" contains "$out" "staged"
expect "the files were being written" [ -d "$work/crash/.bad.tmp" ]
expect "no checkpoint is left half made" [ ! -e "$work/crash/bad" ]
run_accel "$recipe" --nproc 1 -- "$work/crash" resume
expect "the checkpoint before still loads ($err)" contains "$out" "loaded at update 1"
finish

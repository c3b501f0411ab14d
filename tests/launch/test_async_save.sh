# acc:save_state(dir, {async = true}) (docs/live-runs.md): the same files,
# byte for byte, as a synchronous save of the same state, though training
# changes the weights while they are written (1 and 2 ranks), and whatever
# the pace of its writer (writer_share); a rank killed
# with SIGKILL while it writes (ACCEL_FAULT_INJECT) leaves the checkpoint before loadable and
# none half made.
source "$(dirname "$0")/lib.sh" "$@"
recipe=$source_root/tests/launch/async_save_recipe.lua

same_files() {  # ROOT ASYNC: ROOT/ASYNC holds ROOT/sync's files, byte for byte
  [ "$(cd "$1/sync" && ls -A | sort)" = "$(cd "$1/$2" && ls -A | sort)" ] || return 1
  for f in "$1"/sync/*; do cmp "$f" "$1/$2/$(basename "$f")" || return 1; done
}
for nproc in 1 2; do
  run_accel "$recipe" --nproc $nproc -- "$work/same-$nproc" same
  expect "$nproc rank(s): the asynchronous saves end well ($err)" contains "$out" "waited for $work/same-$nproc/paced"
  expect "$nproc rank(s): it wrote the synchronous save's files, byte for byte" same_files "$work/same-$nproc" async
  expect "$nproc rank(s): a paced writer writes the same bytes" same_files "$work/same-$nproc" paced
  expect "$nproc rank(s): a share of 0 is refused, naming the option" contains "$out" "Accelerator:save_state: writer_share must be a number in (0, 1]"
  expect "$nproc rank(s): a share without async is refused" contains "$out" "writer_share paces an asynchronous save"
  expect "$nproc rank(s): nothing was saved by a refused call" [ ! -e "$work/same-$nproc/refused" ]
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

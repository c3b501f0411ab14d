# accel.logging.get_logger on 2 ranks: messages once, from the main
# process, unless a call says {main_process_only = false}; levels from the
# logger, else $ACCEL_LOG_LEVEL, else info; set_level; an unknown level in
# ACCEL_LOG_LEVEL is an error naming the variable.
source "$(dirname "$0")/lib.sh"

cat >"$work/log.lua" <<'LUA'
local log = accel.logging.get_logger("train")
assert(accel.get_logger == accel.logging.get_logger)
local rank = accel.PartialState().process_index
log:debug("debug %d", 1)
log:info("info %s", "two")
log:warning("warning three")
log:error({ main_process_only = false }, "error from rank %d", rank)
log:critical("critical five")
log:set_level("error")
log:warning("hidden by set_level")
log:error("shown after set_level")
assert(log:get_level() == "error" and log:is_enabled_for("critical") and not log:is_enabled_for("info"))
local ok, message = pcall(function() log:set_level("loud") end)
assert(not ok and message:find("unknown log level 'loud'", 1, true), message)
ok, message = pcall(function() log:info({ main_process = false }, "x") end)
assert(not ok and message:find("unknown option 'main_process'", 1, true), message)
local quiet = accel.get_logger("quiet", "critical")
quiet:error("hidden by the logger's own level")
print("logging recipe done")
LUA

run_accel "$work/log.lua" --nproc 2
expect "the recipe runs" [ "$status" -eq 0 ]
expect "to its end" contains "$out" "logging recipe done"
lacks() { ! grep -q "$1" "$work/err"; }
expect "debug hidden at the default level info" lacks 'debug 1'
expect "info once, from the main process" [ "$(grep -cx 'INFO train: info two' "$work/err")" -eq 1 ]
expect "warning once" [ "$(grep -cx 'WARNING train: warning three' "$work/err")" -eq 1 ]
expect "main_process_only = false: rank 0 logs, its rank in the line" \
  grep -qx 'ERROR train \[rank 0\]: error from rank 0' "$work/err"
expect "main_process_only = false: rank 1 logs too" grep -qx '\[rank 1\] ERROR train \[rank 1\]: error from rank 1' "$work/err"
expect "no other line from rank 1" [ "$(grep -c '^\[rank 1\]' "$work/err")" -eq 1 ]
expect "critical" grep -qx 'CRITICAL train: critical five' "$work/err"
expect "set_level hides lower levels" lacks hidden
expect "and shows its own" grep -qx 'ERROR train: shown after set_level' "$work/err"

ACCEL_LOG_LEVEL=debug run_accel "$work/log.lua" --nproc 2
expect "ACCEL_LOG_LEVEL=debug shows debug" grep -qx 'DEBUG train: debug 1' "$work/err"
ACCEL_LOG_LEVEL=WARNING run_accel "$work/log.lua" --nproc 2
expect "ACCEL_LOG_LEVEL=WARNING hides info" lacks 'info two'
expect "and shows warnings" grep -qx 'WARNING train: warning three' "$work/err"
ACCEL_LOG_LEVEL=verbose run_accel "$work/log.lua" --nproc 2
expect "an unknown ACCEL_LOG_LEVEL fails the run" [ "$status" -ne 0 ]
expect "naming the variable and the level" contains "$err" "ACCEL_LOG_LEVEL: unknown log level 'verbose' (known: debug, info, warning, error, critical)"

finish

# Shared by the launch tests: run accel-run with a time limit and check what
# it printed. Usage: source lib.sh; then `run_accel ARGS...` sets $status,
# $out, $err and $elapsed.
accel_run=$1
source_root=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
passes=0

run_accel() {
  local start=$SECONDS
  timeout 60 "$accel_run" "$@" >"$work/out" 2>"$work/err"
  status=$?
  elapsed=$((SECONDS - start))
  out=$(cat "$work/out")
  err=$(cat "$work/err")
}

pass() { passes=$((passes + 1)); echo "ok: $1"; }
fail() {
  failures=$((failures + 1))
  echo "FAILED: $1"
  echo "--- stdout"; echo "$out"; echo "--- stderr"; echo "$err"; echo "---"
}

expect() {  # expect DESCRIPTION CONDITION...
  local what=$1; shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}

contains() { [[ "$1" == *"$2"* ]]; }

# No process of this test's recipes may outlive the launcher.
no_survivors() { ! pgrep -f "$work/" >/dev/null; }

finish() {
  echo "$(basename "$0" .sh): $passes passed, $failures failed"
  [ "$failures" -eq 0 ]
}

#!/usr/bin/env bash
# accel-run's command-line errors: each exits 2 and names what is wrong,
# before any worker starts.
# Usage: test_launch_errors.sh ACCEL_RUN SOURCE_ROOT
set -u
accel_run=$1
export XDG_CONFIG_HOME=$(mktemp -d)  # no default config of the machine's user
scratch=$(mktemp -d)
trap 'rm -rf "$scratch" "$XDG_CONFIG_HOME"' EXIT
recipe=$scratch/recipe.lua
echo 'print("never run")' > "$recipe"
failures=0

# expect_error WANTED_TEXT ARGS...: accel-run ARGS exits 2, prints WANTED_TEXT
# on stderr, and nothing on stdout (so no worker ran).
expect_error() {
  local wanted=$1
  shift
  local status=0
  timeout 20 "$accel_run" "$@" > "$scratch/out" 2> "$scratch/err" || status=$?
  if [[ $status -ne 2 ]]; then
    echo "FAIL: accel-run $* exited $status, expected 2"
    failures=$((failures + 1))
  elif ! grep -qF -- "$wanted" "$scratch/err"; then
    echo "FAIL: accel-run $*: stderr lacks '$wanted':"
    sed 's/^/    /' "$scratch/err"
    failures=$((failures + 1))
  elif [[ -s $scratch/out ]]; then
    echo "FAIL: accel-run $* wrote to stdout:"
    sed 's/^/    /' "$scratch/out"
    failures=$((failures + 1))
  else
    echo "ok: accel-run $*"
  fi
}

expect_error "unknown option '--bogus'" --bogus "$recipe"
expect_error "unknown option '--nprocs'" "$recipe" --nprocs=2
expect_error "--nproc expects an integer from 1 to 4096, got 'abc'" --nproc abc "$recipe"
expect_error "--nproc expects an integer from 1 to 4096, got '0'" "$recipe" --nproc=0
expect_error "--nproc needs a value" "$recipe" --nproc
expect_error "--master-port expects an integer from 0 to 65535, got '99999'" \
  --master-port 99999 "$recipe"
expect_error "unsupported --backend 'ucc' (supported: gloo" --backend ucc "$recipe"
expect_error "unknown option '--nprocs' (did you mean '--nproc'?)" "$recipe" --nprocs 2
expect_error "--node-rank is 1, but with --nnodes 1 node ranks go from 0 to 0" --node-rank 1 "$recipe"
expect_error "give --master-port" --nnodes 2 "$recipe"
expect_error "--timeout expects a number of seconds" --timeout soon "$recipe"
expect_error "no recipe given" --nproc 2
expect_error "no recipe given"
expect_error "unexpected argument 'lr=0.1' after the recipe" "$recipe" lr=0.1
expect_error "cannot read the recipe '$scratch/missing.lua'" "$scratch/missing.lua"
expect_error "Try 'accel-run --help'" --bogus "$recipe"

# --help is not an error: it prints the options on stdout and exits 0.
status=0
"$accel_run" --help > "$scratch/out" 2>&1 || status=$?
if [[ $status -ne 0 ]] || ! grep -qF -- "--nproc N" "$scratch/out"; then
  echo "FAIL: accel-run --help exited $status or lacks --nproc:"
  sed 's/^/    /' "$scratch/out"
  failures=$((failures + 1))
else
  echo "ok: accel-run --help"
fi

if [[ $failures -ne 0 ]]; then
  echo "$failures launch error check(s) failed"
  exit 1
fi
echo "all launch error checks passed"

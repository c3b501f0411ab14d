#!/usr/bin/env bash
# Fuzzes the parsers of outside input (docs/testing.md, "Fuzzing"):
#
#   scripts/fuzz.sh [TARGET] [--seconds N]
#
# Builds build-fuzz/ with clang++-14 (libFuzzer, AddressSanitizer,
# UndefinedBehaviorSanitizer) and runs TARGET, or every target one after
# another, for N seconds each (default 600). Each run starts from
# tests/fuzz/corpus/<TARGET> and its own working corpus from earlier runs
# (build-fuzz/corpus/<TARGET>); what it found that reaches new code is
# merged back into tests/fuzz/corpus/<TARGET> (commit it). A crash, sanitizer
# report, hang (over 10 s) or leak is saved in tests/fuzz/crashes/<TARGET>/
# and ends that target's run; the others still run, and the script fails at
# the end. Prints executions per second and coverage per target. Needs no
# network. Targets: the names of tests/fuzz/fuzz_<TARGET>.cpp.
set -euo pipefail
cd "$(dirname "$0")/.."

all_targets=()
for harness in tests/fuzz/fuzz_*.cpp; do
  name=${harness##*/fuzz_}
  all_targets+=("${name%.cpp}")
done

targets=()
seconds=600
while (($#)); do
  case "$1" in
    --seconds)
      [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: --seconds takes a positive integer" >&2; exit 2; }
      seconds=$2
      shift 2
      ;;
    -h | --help)
      sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    -*)
      echo "fuzz.sh: unknown option '$1' (see --help)" >&2
      exit 2
      ;;
    *)
      if [[ " ${all_targets[*]} " != *" $1 "* ]]; then
        echo "fuzz.sh: no target '$1'; targets: ${all_targets[*]}" >&2
        exit 2
      fi
      targets+=("$1")
      shift
      ;;
  esac
done
((${#targets[@]})) || targets=("${all_targets[@]}")

# Building and fuzzing share the machine: both run at low priority.
# The Lua targets load accel.core from the project's own build.
if [[ " ${targets[*]} " == *" value_file "* || " ${targets[*]} " == *" sharded_layout "* ||
      " ${targets[*]} " == *" download_configs "* || " ${targets[*]} " == *" model_config "* ]]; then
  [[ -f build/CMakeCache.txt ]] || cmake -S . -B build
  nice -n 10 cmake --build build -j "${ACCEL_FUZZ_BUILD_JOBS:-2}" --target accel_worker
fi
# Configured each time, so that a target added since is known to make.
cmake -S tests/fuzz -B build-fuzz -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
nice -n 10 cmake --build build-fuzz -j "${ACCEL_FUZZ_BUILD_JOBS:-2}" --target "${targets[@]/#/fuzz_}"

# Leaks known and not the harness's to report (tests/fuzz/lsan.supp); UB
# reports with the stack that led there.
export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

summary=()
failed=()
for target in "${targets[@]}"; do
  corpus=tests/fuzz/corpus/$target
  work=build-fuzz/corpus/$target
  crashes=tests/fuzz/crashes/$target
  log=build-fuzz/fuzz_$target.log
  mkdir -p "$corpus" "$work" "$crashes"
  echo "== fuzz_$target for ${seconds}s (log: $log)"
  status=0
  nice -n 10 "build-fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$crashes/" "$work" "$corpus" >"$log" 2>&1 || status=$?
  tail -n 25 "$log"
  # The last status line holds the coverage: "#N ... cov: C ft: F corp: ...".
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -n 1 || true)
  execs=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  if ((status)); then
    failed+=("$target")
    summary+=("$(printf '%-15s FAILED (exit %d): see %s and %s/' "$target" "$status" "$log" "$crashes")")
    continue
  fi
  # Only inputs that reach code the committed corpus does not join it:
  # edges alone (-use_counters=0), not how often each runs, keep it small.
  nice -n 10 "build-fuzz/fuzz_$target" -merge=1 -use_counters=0 "$corpus" "$work" >>"$log" 2>&1
  summary+=("$(printf '%-15s %8s exec/s  %s' "$target" "${execs:-?}" "${cov:-cov: ?}")")
done

echo
echo "fuzzed ${seconds}s per target:"
printf '  %s\n' "${summary[@]}"
if ((${#failed[@]})); then
  echo "fuzz.sh: findings in: ${failed[*]} (inputs in tests/fuzz/crashes/<target>/)" >&2
  exit 1
fi

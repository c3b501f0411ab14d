#!/usr/bin/env bash
# Chaos test of restarts and exact resume: trains tests/launch/chaos_recipe.lua
# once uninterrupted for the reference result, then N times on 2 ranks under
# `--max-restarts 3`, each time SIGKILLing a random rank from outside at a
# random step of its first start. Every run must exit 0 after exactly one
# restart (the launcher naming the killed rank), leave no process behind,
# and end on the reference's final weights and final checkpoint, byte for
# byte.
#
# With --async the checkpoints are asynchronous (save_state(dir, {async =
# true})) and the kill lands mid-write: the chosen rank's background writer
# sends the rank SIGKILL after a random one of its steps (a file written, a
# marker, the manifest, the rename) while the rank trains on. The checkpoint
# before the one in flight must stay loadable and the resume from it exact.
#
#   scripts/chaos.sh [--runs N] [--seed S] [--async] [--accel-run PATH] [--recipe PATH]
#
# --runs N         kill runs (default 30)
# --seed S         seeds the choice of rank, step and delay (default 2026,
#                  whose 30 runs include kills before the first checkpoint),
#                  so a failing run can be chosen again; the kill still lands
#                  a few milliseconds apart from one try to the next
# --async          asynchronous checkpoints, killed mid-write (above)
# --accel-run PATH the launcher (default: build/accel-run of this checkout)
# --recipe PATH    the training (default: tests/launch/chaos_recipe.lua); a
#                  variant that does not resume exactly must make this fail
#
# Prints one line per run and a summary; exits 1 when any run failed, 2 on a
# usage error. A failing run's folder (outputs, checkpoints) is kept and named.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
runs=30
seed=2026
accel_run=$root/build/accel-run
recipe=$root/tests/launch/chaos_recipe.lua
async=0

usage() { sed -n '/^#   scripts/,/^# usage error/p' "$0" | sed 's/^# \{0,1\}//'; exit "$1"; }
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=${2:?}; shift 2 ;;
    --seed) seed=${2:?}; shift 2 ;;
    --accel-run) accel_run=${2:?}; shift 2 ;;
    --recipe) recipe=${2:?}; shift 2 ;;
    --async) async=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "chaos.sh: unknown argument '$1'" >&2; usage 2 >&2 ;;
  esac
done
[[ $runs =~ ^[0-9]+$ && $seed =~ ^[0-9]+$ ]] || { echo "chaos.sh: --runs and --seed take integers" >&2; exit 2; }
[ -x "$accel_run" ] || { echo "chaos.sh: no launcher at '$accel_run' (build first, or give --accel-run)" >&2; exit 2; }
[ -f "$(dirname "$accel_run")/libaccel_worker.so" ] || { echo "chaos.sh: no libaccel_worker.so beside '$accel_run'" >&2; exit 2; }
[ -f "$recipe" ] || { echo "chaos.sh: no recipe at '$recipe'" >&2; exit 2; }
accel_run=$(realpath "$accel_run")
recipe=$(realpath "$recipe")

total_steps=40     # the recipe's; a kill is aimed at steps 1 to total_steps - 1
pace_ms=15         # the recipe's pause after each step of a first start
max_writer_steps=30  # --async: the kill comes after writer step 1 to this
                   # (every rank's writer takes 3 or more steps a save, and
                   # saves 13: it always lands)
max_delay_ms=25    # the kill lands 0..max_delay_ms after the target step is
                   # seen: in the pause, in the next step's collectives, or
                   # in a save_state
limit_s=120        # no accel-run may take longer (a few seconds is normal)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/accel-chaos.XXXXXX")
launcher=
failed=0
cleanup() {
  # An interrupted script stops its training too: timeout passes SIGTERM to
  # accel-run, which stops its workers.
  if [ -n "$launcher" ]; then kill "$launcher" 2>/dev/null || true; wait "$launcher" 2>/dev/null || true; fi
  if [ "$failed" -eq 0 ]; then rm -rf "$tmp"; else echo "chaos: outputs kept in $tmp"; fi
}
trap cleanup EXIT
trap 'failed=1; exit 130' INT TERM

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# Every run uses a private copy of the launcher and the worker library it
# loads from its own folder: a rebuild of the build folder while the script
# runs (a minute or more) would otherwise mix two builds, the launcher from
# one and libaccel_worker.so from the other, or catch the library half
# written. (Lua files are read from the source tree the build names.)
mkdir -p "$tmp/bin"
cp "$accel_run" "$tmp/bin/accel-run"
cp "$(dirname "$accel_run")/libaccel_worker.so" "$tmp/bin/"
echo "chaos: $runs runs, seed $seed$([ "$async" -eq 0 ] || echo ", async checkpoints killed mid-write"), $accel_run (copied; md5 $(cat "$tmp/bin/accel-run" "$tmp/bin/libaccel_worker.so" | md5sum | cut -c1-12)), $recipe"
accel_run=$tmp/bin/accel-run

# The reference: the same recipe, never killed (and never paused).
mkdir -p "$tmp/reference"
start_all=$(now_ms)
ref_status=0
CHAOS_ASYNC=$async timeout -k 10 "$limit_s" "$accel_run" "$recipe" --nproc 2 --threads 1 -- "$tmp/reference" \
  >"$tmp/reference/out" 2>"$tmp/reference/err" || ref_status=$?
if [ "$ref_status" -ne 0 ] || [ ! -f "$tmp/reference/final/model.safetensors" ]; then
  failed=1
  echo "chaos: the uninterrupted reference run failed (exit $ref_status):"
  cat "$tmp/reference/err"
  exit 1
fi
echo "reference: uninterrupted run done in $(( $(now_ms) - start_all )) ms"

RANDOM=$seed
ok=0
declare -A killed_ranks=()
steps_seen=()
from_scratch=0
in_save=0
for ((i = 1; i <= runs; i++)); do
  rank=$((RANDOM % 2))
  target=$((1 + RANDOM % (total_steps - 1)))
  delay_ms=$((RANDOM % (max_delay_ms + 1)))
  writer_step=
  [ "$async" -eq 0 ] || writer_step=$((1 + RANDOM % max_writer_steps))
  dir=$tmp/run-$i
  mkdir -p "$dir/progress"
  start=$(now_ms)

  CHAOS_PROGRESS_DIR=$dir/progress CHAOS_PACE_MS=$pace_ms CHAOS_ASYNC=$async \
    CHAOS_ASYNC_KILL=${writer_step:+$rank:$writer_step} timeout -k 10 "$limit_s" "$accel_run" "$recipe" --nproc 2 --threads 1 --max-restarts 3 -- "$dir" \
    >"$dir/out" 2>"$dir/err" &
  launcher=$!

  # Poll the chosen rank's "<pid> <step>" file; once it reaches the target
  # step, wait the delay and SIGKILL that pid, after checking it is a worker
  # of this run (its command line names the run's folder).
  killed_pid=
  # --async: the rank's own writer kills it; its pid is the one it reported.
  [ "$async" -eq 0 ] || killed_pid=writer
  while kill -0 "$launcher" 2>/dev/null; do
    if [ -z "$killed_pid" ] && { read -r pid step _ <"$dir/progress/rank-$rank"; } 2>/dev/null \
       && [ "$step" -ge "$target" ]; then
      sleep "$(printf '0.%03d' "$delay_ms")"
      if tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF "$dir" && kill -9 "$pid" 2>/dev/null; then
        killed_pid=$pid
      else
        killed_pid=none  # it ended before the kill
      fi
    fi
    sleep 0.005
  done
  status=0
  wait "$launcher" || status=$?
  launcher=
  ms=$(( $(now_ms) - start ))

  # The killed rank reports nothing after its death: its file holds the
  # last step it finished ("done": the kill landed in the pause or the next
  # step) or the step whose save_state it had begun ("saving").
  landed=? phase=
  if [ -n "$killed_pid" ] && [ "$killed_pid" != none ]; then
    read -r _ landed phase <"$dir/progress/rank-$rank" || true
  fi
  if [ "$async" -eq 1 ]; then
    where="at writer step $(printf '%2s' "$writer_step"), training after step $(printf '%2s' "$landed")"
    [ "$phase" != saving ] || where="at writer step $(printf '%2s' "$writer_step"), training saving step $(printf '%2s' "$landed")"
    grep -q "rank $rank was killed by signal 9" "$dir/err" || killed_pid=none
  else
    case $phase in
      saving) where="while saving step $(printf '%2s' "$landed")"; in_save=$((in_save + 1)) ;;
      *) where="after step $(printf '%2s' "$landed")    " ;;
    esac
  fi
  restarts=$(grep -c 'accel-run: restarting all workers' "$dir/err" || true)
  resumed=$(awk '$1 == "start" && $2 == 1 { print $4 }' "$dir/starts" 2>/dev/null || true)
  starts=$(awk '$1 == "start" { print $2 }' "$dir/starts" 2>/dev/null | tr '\n' ' ' || true)

  why=()
  if [ -z "$killed_pid" ] || [ "$killed_pid" = none ]; then
    if [ "$async" -eq 1 ]; then
      why+=("no kill landed: rank $rank's writer never reached its step $writer_step")
    else
      why+=("no kill landed: rank $rank ended before step $target was seen")
    fi
  fi
  case $status in
    0) ;;
    124|137) why+=("accel-run did not end within $limit_s s (a hang?); timeout stopped it") ;;
    *) why+=("accel-run exited $status: $(grep -m1 'accel-run: rank' "$dir/err" || tail -n1 "$dir/err")") ;;
  esac
  [ "$restarts" -eq 1 ] || why+=("$restarts restarts, expected 1")
  if [ -n "$killed_pid" ] && [ "$killed_pid" != none ] && \
     ! grep -q "rank $rank was killed by signal 9" "$dir/err"; then
    why+=("the launcher did not report rank $rank killed by signal 9")
  fi
  [ "$starts" = "0 1 " ] || why+=("the main process started with ACCEL_RESTART_COUNT '${starts% }', expected '0 1'")
  weights=missing state=missing
  if [ -f "$dir/final/model.safetensors" ]; then
    weights=different
    cmp -s "$tmp/reference/final/model.safetensors" "$dir/final/model.safetensors" && weights=equal
    [ "$weights" = equal ] || why+=("final weights differ from the reference")
  fi
  if [ -d "$dir/final/state" ]; then
    state=different
    diff -rq "$tmp/reference/final/state" "$dir/final/state" >"$dir/state.diff" 2>&1 && state=equal
    [ "$state" = equal ] || why+=("final checkpoint differs from the reference in: $(sed -n 's|^Files .*/\([^/]*\) and .* differ$|\1|p; s|^Only in \(.*\)|only in \1|p' "$dir/state.diff" | tr '\n' ' ')")
  fi
  [ "$weights" != missing ] && [ "$state" != missing ] || why+=("the run left no final weights or checkpoint")
  # Every worker of this run must be gone once accel-run has returned.
  if survivors=$(pgrep -af "$dir( |\$)" 2>/dev/null); then
    why+=("processes outlived the run: $(echo "$survivors" | tr '\n' ';')")
  fi

  killed_ranks[$rank]=$(( ${killed_ranks[$rank]:-0} + 1 ))
  [ "$landed" = "?" ] || steps_seen+=("$landed")
  [ "${resumed:-}" != 0 ] || from_scratch=$((from_scratch + 1))
  aim=$(printf ' (aimed at %2d, +%2d ms)' "$target" "$delay_ms")
  [ "$async" -eq 0 ] || aim=
  line=$(printf 'run %2d/%d: killed rank %d %s%s, %d restart(s), resumed from step %2s, weights %s, checkpoint %s, %5d ms' \
    "$i" "$runs" "$rank" "$where" "$aim" "$restarts" "${resumed:-?}" "$weights" "$state" "$ms")
  if [ ${#why[@]} -eq 0 ]; then
    ok=$((ok + 1))
    echo "$line: ok"
    rm -rf "$dir"
  else
    failed=1
    echo "$line: FAILED"
    for w in "${why[@]}"; do echo "    $w"; done
    echo "    outputs: $dir (out, err, starts, project/checkpoints)"
  fi
done

total_ms=$(( $(now_ms) - start_all ))
sorted=$(printf '%s\n' "${steps_seen[@]}" | sort -n | tr '\n' ' ')
echo "chaos: $ok of $runs runs ended on the reference weights and checkpoint after a restart;" \
  "rank 0 killed ${killed_ranks[0]:-0} times, rank 1 ${killed_ranks[1]:-0};" \
  "kills landed after steps: ${sorted% } ($in_save inside a save_state); $from_scratch restart(s) from scratch (killed before the first checkpoint);" \
  "total $((total_ms / 1000)).$(printf '%01d' $((total_ms % 1000 / 100))) s"
if pgrep -af "$tmp" >/dev/null 2>&1; then
  failed=1
  echo "chaos: FAILED: processes of the runs are still alive:"
  pgrep -af "$tmp" || true
fi
if [ "$ok" -ne "$runs" ]; then failed=1; fi
if [ "$failed" -ne 0 ]; then echo "chaos: FAILED"; exit 1; fi
echo "chaos: passed"

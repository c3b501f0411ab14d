# accel-run plot: two runs' metrics.jsonl (one still being written) drawn
# by gnuplot as PNG and SVG, one chart per metric, both runs named in each
# key; names from the files stay text (no byte of a file runs as gnuplot
# code); bad requests are errors naming what is wrong.
source "$(dirname "$0")/lib.sh"
command -v gnuplot >/dev/null || { echo "FAILED: gnuplot is not installed (scripts/setup.sh installs gnuplot-nox)"; exit 1; }

mkdir -p "$work/runs/base" "$work/runs/wide"
for step in 0 1 2 3 4 5 6 7 8 9; do
  echo "{\"step\": $step, \"time\": 1.5, \"loss\": $(awk "BEGIN { print 2 / ($step + 1) }"), \"acc\": 0.$step}"
done >"$work/runs/base/metrics.jsonl"
for step in 0 2 4 6 8; do
  echo "{\"step\": $step, \"time\": 1.5, \"loss\": $(awk "BEGIN { print 1 / ($step + 1) }"), \"acc\": \"NaN\"}"
done >"$work/runs/wide/metrics.jsonl"
printf '{"step": 10, "loss": 0.0' >>"$work/runs/wide/metrics.jsonl"  # a line still being written

run_accel plot "$work/runs/base" "$work/runs/wide/" -o "$work/chart.png" --size 900,400
expect "a PNG of both runs" [ "$status" -eq 0 ]
png_ok() { /usr/bin/python3 "$source_root/tests/launch/png_check.py" "$@" >"$work/png.out" 2>&1; }
expect "a PNG 900x400, not blank, with lines in both runs' colours" png_ok "$work/chart.png" 900 400
cat "$work/png.out"

run_accel plot "$work/runs/base" "$work/runs/wide" -o "$work/chart.svg" --metric loss --smooth 2
expect "an SVG of one metric" [ "$status" -eq 0 ]
svg=$(cat "$work/chart.svg" 2>/dev/null)
expect "one path in the first run's colour" [ "$(grep -c "<path stroke='rgb( 31, 119, 180)'" <<<"$svg")" -eq 1 ]
expect "one path in the second run's colour" [ "$(grep -c "<path stroke='rgb(255, 127,  14)'" <<<"$svg")" -eq 1 ]
expect "the key names both runs" grep -q ">$work/runs/base</text>" <<<"$svg"
expect "the key names the second run" grep -q ">$work/runs/wide</text>" <<<"$svg"
expect "the chart is titled with the metric and the smoothing" grep -q ">loss (mean of 2)</text>" <<<"$svg"
expect "the axes are labelled" grep -q ">step</text>" <<<"$svg"

# Hostile names: a run folder and a metric whose names would be gnuplot code.
hostile="$work/runs/x'; system('touch $work/pwned1'); print '\`touch $work/pwned2\`@x"
mkdir -p "$hostile"
printf '{"step": 1, "a\\nsystem(\\"touch %s\\")\\n": 1}\n{"step": 2, "a\\nsystem(\\"touch %s\\")\\n": 2}\n' \
  "$work/pwned3" "$work/pwned3" >"$hostile/metrics.jsonl"
run_accel plot "$hostile" -o "$work/hostile.svg"
expect "hostile names are drawn" [ "$status" -eq 0 ]
nothing_ran() { [ ! -e "$work/pwned1" ] && [ ! -e "$work/pwned2" ] && [ ! -e "$work/pwned3" ]; }
expect "and nothing in them ran" nothing_ran
expect "the run's name is text in the key" grep -qF "pwned1" "$work/hostile.svg"

# Quotes that gnuplot 5.4 read past when doubled: a name starting with ' or
# holding '' is drawn like any other, and every chart of the page with it.
mkdir -p "$work/runs/quotes"
printf '{"step": 1, "%s": 1, "%s": 2, "plain": 3}\n{"step": 2, "%s": 2, "%s": 3, "plain": 4}\n' \
  "'start" "two''quotes" "'start" "two''quotes" >"$work/runs/quotes/metrics.jsonl"
run_accel plot "$work/runs/quotes" -o "$work/quotes.svg"
expect "names with quotes are drawn" [ "$status" -eq 0 -a -z "$err" ]
expect "a chart is titled with a name starting with a quote" grep -q ">'start</text>" "$work/quotes.svg"
expect "and one with a name holding a doubled quote" grep -q ">two''quotes</text>" "$work/quotes.svg"
expect "and the chart after them too" grep -q ">plain</text>" "$work/quotes.svg"

# Fuzzed names (quotes, backquotes, macros, newlines, calls; seeded): every
# page is drawn, gnuplot reports no error and no payload runs.
python3 - "$work/fuzz" "$work/fuzzed" <<'PY'
import json, os, random, sys
folder, marker = sys.argv[1], sys.argv[2]
random.seed(7)
pieces = ["'", "''", "`", "@", "$", "(", ")", ";", "\\", '"', "\n", "\t", " ", "x", "system(", "print ",
          "`touch " + marker + "`", "'.system('touch " + marker + "').'", "@x", "\u00e9", "%c", "sprintf("]
for page in range(10):
    os.makedirs(f"{folder}/{page}", exist_ok=True)
    names = set()
    while len(names) < 30:
        names.add("".join(random.choice(pieces) for _ in range(random.randint(1, 8))))
    with open(f"{folder}/{page}/metrics.jsonl", "w") as f:
        for step in range(3):
            f.write(json.dumps({"step": step, **{n: step + i for i, n in enumerate(sorted(names))}}) + "\n")
PY
fuzz_ok=0
for page in 0 1 2 3 4 5 6 7 8 9; do
  run_accel plot "$work/fuzz/$page" -o "$work/fuzz/$page.svg"
  [ "$status" -eq 0 ] && [ -z "$err" ] && [ -s "$work/fuzz/$page.svg" ] && fuzz_ok=$((fuzz_ok + 1))
done
expect "300 fuzzed names: all 10 pages drawn without a gnuplot error" [ "$fuzz_ok" -eq 10 ]
expect "and no payload ran" [ ! -e "$work/fuzzed" ]

# Values the tracker writes as "NaN" or "Infinity" (a loss that diverged)
# are gaps in the line, and said; they no longer vanish silently.
mkdir -p "$work/runs/diverged"
printf '{"step": 1, "loss": 1}\n{"step": 2, "loss": "NaN"}\n{"step": 3, "loss": "Infinity"}\n{"step": 4, "loss": 2}\n{"step": 5, "loss": 3}\n' \
  >"$work/runs/diverged/metrics.jsonl"
run_accel plot "$work/runs/diverged" -o "$work/diverged.svg"
expect "a run with NaN and Infinity is drawn" [ "$status" -eq 0 ]
expect "which says so, with the first step" \
  contains "$err" "$work/runs/diverged: 'loss' has 2 values that are NaN or infinite (the first at step 2), drawn as gaps"
# The run's path: the key's sample, then the line, which restarts (a move,
# M) after the gap instead of joining step 1 to step 4: three moves, not two.
expect "the line breaks at the gap" \
  [ "$(grep "<path stroke='rgb( 31, 119, 180)'" "$work/diverged.svg" | grep -o "M[0-9]" | wc -l)" -eq 3 ]

# A page holds 36 charts: more metrics are left out by name, not drawn
# into an image of gigabytes; --size is bounded too.
mkdir -p "$work/runs/many"
python3 -c 'import json; print(json.dumps({"step": 1, **{"m%03d" % i: i for i in range(100)}}))' \
  >"$work/runs/many/metrics.jsonl"
run_accel plot "$work/runs/many" -o "$work/many.png"
expect "100 metrics: 36 are drawn" [ "$status" -eq 0 ]
expect "the others are named as left out" \
  contains "$err" "64 of 100 metrics are not drawn (a page holds 36 charts; choose them with --metric): m036, m037"
run_accel plot "$work/runs/many" -o "$work/many.png" --size 20000,100
expect "an image side past 10000 is refused" contains "$err" "--size takes at most 10000 on each side, got '20000,100'"

run_accel plot "$work/runs/base" --size 80,20
expect "text charts on stdout without -o" [ "$status" -eq 0 ]
expect "titled by metric" contains "$out" "loss"

run_accel plot "$work/runs/base" --metric lr -o "$work/x.png"
expect "an unknown metric is an error naming it and the known ones" \
  contains "$err" "no run has a metric 'lr' (they have: acc, loss)"
run_accel plot "$work/nowhere" -o "$work/x.png"
expect "a folder without metrics.jsonl is an error naming the file" contains "$err" "cannot read $work/nowhere/metrics.jsonl"
run_accel plot "$work/runs/base" -o "$work/x.jpg"
expect "only .png and .svg" contains "$err" "-o names a .png or .svg file"
echo 'not json' >"$work/runs/base/metrics.jsonl"
run_accel plot "$work/runs/base"
expect "a broken line is an error naming the file and line" contains "$err" "$work/runs/base/metrics.jsonl:1: is not valid JSON: "
expect "with exit status 2" [ "$status" -eq 2 ]
printf '{"step": 1, "loss": 2}\n[1]\n' >"$work/runs/base/metrics.jsonl"
run_accel plot "$work/runs/base"
expect "JSON that is no object is named so" contains "$err" "$work/runs/base/metrics.jsonl:2: is not a JSON object"
printf '{"step": 1, "loss": 1e999}\n' >"$work/runs/base/metrics.jsonl"
run_accel plot "$work/runs/base"
expect "a number out of range is named as the cause" \
  contains "$err" "metrics.jsonl:1: is not valid JSON: number overflow parsing '1e999'"
printf '{"step": 1, "lo\xffss": 1}\n' >"$work/runs/base/metrics.jsonl"
run_accel plot "$work/runs/base"
expect "so is ill-formed UTF-8, its byte escaped" contains "$err" "ill-formed UTF-8 byte; last read: '\"lo\\xff'"

# Files no tracker writes: refused at once, before a byte is read.
mkdir -p "$work/runs/fifo" "$work/runs/zero" "$work/runs/long"
mkfifo "$work/runs/fifo/metrics.jsonl"
run_accel plot "$work/runs/fifo"
expect "a FIFO is refused" contains "$err" "$work/runs/fifo/metrics.jsonl is not a regular file"
expect "at once (no writer is waited for)" [ "$elapsed" -lt 5 ]
ln -s /dev/zero "$work/runs/zero/metrics.jsonl"
run_accel plot "$work/runs/zero"
expect "so is a device that reads without end" contains "$err" "$work/runs/zero/metrics.jsonl is not a regular file"
head -c 1100000 /dev/zero | tr '\0' 'a' >"$work/runs/long/metrics.jsonl"
run_accel plot "$work/runs/long"
expect "a line past 1 MiB is refused, named" contains "$err" "$work/runs/long/metrics.jsonl:1: a line longer than 1 MiB"

finish

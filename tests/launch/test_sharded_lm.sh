# recipes/sharded_lm.lua's quick look (FSDP FULL_SHARD by Block, 2 ranks):
# it trains, reports each rank's share of the model state, and that share is
# half of the whole, as the recipe's first line promises.
source "$(dirname "$0")/lib.sh"

run_accel "$source_root/recipes/sharded_lm.lua" --nproc 2 -- steps=8 layers=2 width=128 heads=4 every=2
expect "the quick look runs on 2 ranks" [ "$status" -eq 0 ]
expect "it reports every 2 steps" [ "$(grep -c '^step ' <<<"$out")" -eq 4 ]
losses=$(awk '/^step / { print $4 }' <<<"$out")
expect "the loss falls" awk -v first="$(head -n 1 <<<"$losses")" -v last="$(tail -n 1 <<<"$losses")" \
  'BEGIN { exit !(last < first) }'
# "(N MiB of fp32 AdamW model state in all, about M MiB a rank)", then per
# rank "K MiB model state": every rank holds about half.
total=$(grep -o '([0-9.]* MiB of fp32 AdamW model state in all' <<<"$out" | grep -o '[0-9.]*' | head -n 1)
shares=$(grep '^step ' <<<"$out" | tail -n 1 | grep -o '[0-9.]* MiB model state' | awk '{ print $1 }')
expect "both ranks report their share" [ "$(wc -l <<<"$shares")" -eq 2 ]
expect "each share is at most half the whole, rounded up" \
  awk -v total="$total" -v shares="$shares" \
  'BEGIN { n = split(shares, s, "\n"); for (i = 1; i <= n; i++) if (s[i] > total / 2 + 1) exit 1; exit !(n == 2) }'
finish

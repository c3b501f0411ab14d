# recipes/generate.lua samples from the model recipes/charlm.lua saved with
# save_model: on 2 ranks it prints every prompt's text once, and with a
# max_memory that leaves most of the model on disk the texts are the same.
source "$(dirname "$0")/lib.sh"

# A few training steps are enough to have a model to load.
timeout 120 "$accel_run" "$source_root/recipes/charlm.lua" --nproc 2 -- /usr/share/common-licenses/GPL-3 \
  "$work/runs" charlm 3e-3 5 >"$work/train.out" 2>"$work/train.err"
status=$?
out=$(cat "$work/train.out"); err=$(cat "$work/train.err")
expect "charlm saves its model" [ "$status" -eq 0 -a -f "$work/runs/charlm/model/model.safetensors" ]

run_accel "$source_root/recipes/generate.lua" --nproc 2 -- "$work/runs/charlm/model"
whole=$(grep '^\[' <<<"$out")
expect "generate on 2 ranks exits 0" [ "$status" -eq 0 ]
expect "the main process prints the 8 texts gathered from 2 processes" contains "$out" "8 texts from 2 processes"
expect "each prompt's text is printed once" [ "$(grep -c '^\[' <<<"$out")" -eq 8 ]
expect "a text begins with its prompt" contains "$out" "[2] This License "

run_accel "$source_root/recipes/generate.lua" --nproc 2 -- "$work/runs/charlm/model" 1MB
offloaded=$(grep '^\[' <<<"$out")
expect "generate with max_memory 1MB exits 0" [ "$status" -eq 0 ]
expect "max_memory 1MB leaves the blocks on disk (one entry, as Accelerate cleans the map)" contains "$out" "blocks     disk"
expect "the texts with layers on disk equal those with the whole model in memory" [ "$offloaded" == "$whole" ]

finish

# recipes/chat.lua driven through a real terminal (tmux): on a tiny random
# Llama (finetune_make_model.lua) with a ChatML chat template, two lines
# typed get replies streamed as they decode, the second reply on the
# conversation kept so far (the replies chat_check.lua computes, which
# differ from the second line's reply alone), /reset and Ctrl-D leave with
# exit code 0; TextStreamer's pieces join to each reply; and
# generate_pretrained.lua, given conversations, gives each the same reply
# on 2 processes.
source "$(dirname "$0")/../launch/lib.sh"
command -v tmux >/dev/null || { echo "tmux is not installed: skipped"; exit 77; }
here="$source_root/tests/models"
session="accel-chat-$$"
socket="$work/tmux.sock"
tmux_() { tmux -S "$socket" "$@"; }
trap 'tmux_ kill-server 2>/dev/null; rm -rf "$work"' EXIT

run_accel "$here/finetune_make_model.lua" --threads 1 -- "$work/model"
cat >"$work/model/chat_template.jinja" <<'TEMPLATE'
{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|endoftext|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}
TEMPLATE
run_accel "$here/chat_check.lua" --threads 1 -- "$work/model" 6 "the cat sat" "a dog ran"
expect "the expected replies are computed, each streamed in pieces" [ "$status" -eq 0 ]
# Printable ASCII only: a random model's replies hold bytes a terminal shows otherwise.
printable() { LC_ALL=C tr -cd 'A-Za-z0-9 ' ; }
reply1=$(sed -n 's/^reply 1: //p' "$work/out" | printable)
reply2=$(sed -n 's/^reply 2: //p' "$work/out" | printable)
alone2=$(sed -n 's/^alone 2: //p' "$work/out" | printable)
expect "the history changes the second reply ('$reply2' against '$alone2' alone)" \
  [ -n "$reply1" -a -n "$reply2" -a "$reply2" != "$alone2" ]

# The distributed-inference recipe takes conversations: on 2 processes, each
# conversation's reply is the one chat gives it alone.
printf '{"messages": [{"role": "user", "content": "the cat sat"}]}\n{"messages": [{"role": "user", "content": "a dog ran"}]}\n' \
  >"$work/chats.jsonl"
run_accel "$source_root/recipes/generate_pretrained.lua" --nproc 2 --threads 1 -- "$work/model" "" 6 "$work/chats.jsonl"
expect "generate_pretrained.lua answers conversations on 2 processes" [ "$status" -eq 0 ]
expect "the first conversation's reply is chat's ('$reply1')" \
  [ "$(sed -n 's/^\[1\] //p' "$work/out" | printable)" = "$reply1" ]
expect "the second's is chat's to that line alone ('$alone2')" \
  [ "$(sed -n 's/^\[2\] //p' "$work/out" | printable)" = "$alone2" ]

tmux_ new-session -d -s "$session" -x 200 -y 50 \
  "'$accel_run' --threads 1 '$source_root/recipes/chat.lua' -- '$work/model' --max_new_tokens 6; echo \$? >'$work/exit'; sleep 60"
tmux_ pipe-pane -o -t "$session" "cat >>'$work/transcript'"
# wait_for TEXT COUNT: the transcript shows TEXT COUNT times (30 s at most).
wait_for() {
  for _ in $(seq 300); do
    [ "$(grep -o -F -- "$1" "$work/transcript" 2>/dev/null | wc -l)" -ge "$2" ] && return 0
    sleep 0.1
  done
  return 1
}
type_line() { tmux_ send-keys -t "$session" -l -- "$1"; tmux_ send-keys -t "$session" Enter; }
wait_for "user> " 1
type_line "the cat sat"
wait_for "user> " 2
type_line "a dog ran"
wait_for "user> " 3
type_line "/reset"
wait_for "forgotten" 1
tmux_ send-keys -t "$session" C-d
for _ in $(seq 100); do [ -f "$work/exit" ] && break; sleep 0.1; done
transcript=$(printable <"$work/transcript")
out="$transcript" err=""
expect "the first reply is streamed after the first line ('$reply1')" contains "$transcript" "assistant $reply1"
expect "the second reply continues the conversation ('$reply2')" contains "$transcript" "assistant $reply2"
expect "Ctrl-D leaves with exit code 0" [ "$(cat "$work/exit" 2>/dev/null)" = "0" ]
finish

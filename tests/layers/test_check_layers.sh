# The include rule between the layers (scripts/check_layers.py): the tree
# keeps it, and a crossing planted in a copy of it is caught and named.
#   bash tests/layers/test_check_layers.sh SOURCE_ROOT
root=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
expect() {  # expect DESCRIPTION CONDITION...
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; echo "$out"; failures=$((failures + 1)); fi
}

out=$(python3 "$root/scripts/check_layers.py" --root "$root" 2>&1)
expect "the tree keeps the rule" [ $? -eq 0 ]

cp -r "$root/engine" "$root/bindings" "$work/"
printf '#include <ATen/ATen.h>\n' >>"$work/engine/protocol/error_file.h"
printf '#include "engine/launch/supervisor.h"\n' >>"$work/engine/comm/reduce_op.cpp"
printf '#include "engine/launch/run_command.h"\n' >>"$work/bindings/registration.cpp"
printf '#include "engine/comm/communicator.h"\n' >>"$work/engine/launch/supervisor.cpp"
printf '#include <torch/torch.h>\n#include "engine/nn/attention.h"\n' >>"$work/engine/chat_template/value.cpp"
out=$(python3 "$root/scripts/check_layers.py" --root "$work" 2>&1)
status=$?
expect "a crossing fails the check" [ $status -eq 1 ]
expect "LibTorch in protocol/ is named" grep -q "engine/protocol/error_file.h:.*protocol/ may not include LibTorch" <<<"$out"
expect "engine/ including launch/ is named" grep -q "engine/comm/reduce_op.cpp:.*engine/ may not include launch/" <<<"$out"
expect "bindings/ including launch/ is named" grep -q "bindings/registration.cpp:.*bindings/ may not include launch/" <<<"$out"
expect "launch/ including engine/ is named" grep -q "engine/launch/supervisor.cpp:.*launch/ may not include engine/" <<<"$out"
expect "LibTorch in chat_template/ is named" grep -q "engine/chat_template/value.cpp:.*chat_template/ may not include LibTorch" <<<"$out"
expect "chat_template/ including engine/ is named" grep -q "engine/chat_template/value.cpp:.*chat_template/ may not include engine/" <<<"$out"
expect "and the count" grep -q "check_layers: 6 include(s) cross the layers" <<<"$out"
echo "test_check_layers: $failures failed"
[ "$failures" -eq 0 ]

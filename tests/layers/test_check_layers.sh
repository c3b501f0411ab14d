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

cp -r "$root/engine" "$root/bindings" "$root/CMakeLists.txt" "$work/"
printf '#include <ATen/ATen.h>\n' >>"$work/engine/protocol/error_file.h"
printf '#include "engine/launch/supervisor.h"\n' >>"$work/engine/comm/reduce_op.cpp"
printf '#include "engine/launch/run_command.h"\n' >>"$work/bindings/registration.cpp"
printf '#include "engine/comm/communicator.h"\n' >>"$work/engine/launch/supervisor.cpp"
printf '#include "engine/formats/manifest.h"\n' >>"$work/engine/tokenizers/vocabulary.cpp"
printf '#include "engine/protocol/rank_list.h"\n' >>"$work/engine/json/json_node.cpp"
printf '#include <c10/util/Half.h>\n' >>"$work/engine/utf8/utf8.cpp"
printf 'add_library(accel_unplanned STATIC engine/x.cpp)\n' >>"$work/CMakeLists.txt"
printf '#include <torch/torch.h>\n#include "engine/nn/attention.h"\n' >>"$work/engine/chat_template/value.cpp"
out=$(python3 "$root/scripts/check_layers.py" --root "$work" 2>&1)
status=$?
expect "a crossing fails the check" [ $status -eq 1 ]
expect "LibTorch in protocol/ is named" grep -q "engine/protocol/error_file.h:.*protocol/ may not include LibTorch" <<<"$out"
expect "engine/ including launch/ is named" grep -q "engine/comm/reduce_op.cpp:.*engine/ may not include launch/" <<<"$out"
expect "bindings/ including launch/ is named" grep -q "bindings/registration.cpp:.*bindings/ may not include launch/" <<<"$out"
expect "launch/ including engine/ is named" grep -q "engine/launch/supervisor.cpp:.*launch/ may not include engine/" <<<"$out"
expect "tokenizers/ including engine/ is named" grep -q "engine/tokenizers/vocabulary.cpp:.*tokenizers/ may not include engine/" <<<"$out"
expect "json/ including protocol/ is named" grep -q "engine/json/json_node.cpp:.*json/ may not include protocol/" <<<"$out"
expect "LibTorch in utf8/ is named" grep -q "engine/utf8/utf8.cpp:.*utf8/ may not include LibTorch" <<<"$out"
expect "a library of the build in no layer is named" grep -q "the library accel_unplanned is in no layer" <<<"$out"
expect "LibTorch in chat_template/ is named" grep -q "engine/chat_template/value.cpp:.*chat_template/ may not include LibTorch" <<<"$out"
expect "chat_template/ including engine/ is named" grep -q "engine/chat_template/value.cpp:.*chat_template/ may not include engine/" <<<"$out"
expect "and the counts" grep -q "check_layers: 9 include(s) cross the layers" <<<"$out"
echo "test_check_layers: $failures failed"
[ "$failures" -eq 0 ]

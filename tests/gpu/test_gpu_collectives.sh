# The collectives on the GPU. This machine may have one GPU, and NCCL takes
# one GPU per rank: NCCL runs on one rank (named with --backend nccl, so the
# group is real), and two ranks share the GPU over Gloo (the flat
# collectives: through host copies into shared memory).
source "$(dirname "$0")/lib.sh"
run_accel test --backend nccl
expect "accel-run test passes on one rank over NCCL" contains "$out" "accel-run test: passed on 1 rank (backend nccl)"
expect "the gradient reduction check ran" contains "$out" "pass  gradient reduction"
run_accel test --backend nccl --debug
expect "the --debug checks run over the Gloo side of an NCCL run" \
  contains "$out" "accel-run test: passed on 1 rank (backend nccl, debug)"
run_accel test --nproc 2 --backend gloo
expect "two ranks sharing the GPU pass over Gloo" contains "$out" "accel-run test: passed on 2 ranks (backend gloo)"
run_accel "$source_root/tests/gpu/backend.lua" --nproc 2
expect "two ranks on one GPU take gloo by themselves" contains "$out" "backend gloo on cuda:0"
run_accel "$source_root/tests/gpu/backend.lua"
expect "a single GPU rank reports its device" contains "$out" "on cuda:0"
run_accel "$source_root/tests/gpu/flat_collectives.lua" --backend nccl
expect "reduce_scatter and all_gather_into over NCCL" contains "$out" "flat collectives ok on cuda:0 (rank 0)"
run_accel "$source_root/tests/gpu/flat_collectives.lua" --nproc 2
expect "reduce_scatter and all_gather_into of two ranks sharing the GPU" \
  contains "$out" "flat collectives ok on cuda:0 (rank 1)"
finish

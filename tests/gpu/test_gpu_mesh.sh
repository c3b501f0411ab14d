# The device mesh on the GPU (mesh.lua: the small Llama trained under a
# ParallelismConfig, within 1e-4 of one process on the same GPU). NCCL takes
# one GPU per rank, so on a machine with one GPU the ranks share it over
# Gloo (CUDA tensors through host copies), and NCCL runs on one rank with a
# mesh of sizes 1; mesh groups over NCCL run only where the machine shows a
# GPU per rank, and are otherwise reported as not run, never as passed.
source "$(dirname "$0")/lib.sh"
gpus=$(grep -c '^GPU [0-9]' <<<"$gpu_lines")

run_accel "$source_root/tests/gpu/mesh.lua" --nproc 2 --backend gloo -- tp2
expect "TP 2 and CP 2 on two ranks sharing the GPU over gloo" \
  contains "$out" "mesh ok: tp2 on cuda:0, world gloo, groups gloo (rank 1)"
run_accel "$source_root/tests/gpu/mesh.lua" --nproc 4 --backend gloo -- tp2_fsdp2
expect "TP 2 x FSDP 2 on four ranks sharing the GPU over gloo" \
  contains "$out" "mesh ok: tp2_fsdp2 on cuda:0, world gloo, groups gloo (rank 3)"
run_accel "$source_root/tests/gpu/mesh.lua" --backend nccl -- alone
expect "a mesh of sizes 1 trains on one rank whose world is NCCL" \
  contains "$out" "mesh ok: alone on cuda:0, world nccl, groups none (rank 0)"

# The layouts over NCCL groups, one GPU per rank, where there are enough.
nccl_mesh() {  # nccl_mesh RANKS LAYOUT
  run_accel "$source_root/tests/gpu/mesh.lua" --nproc "$1" --backend nccl -- "$2"
  expect "$2 over NCCL groups, one GPU per rank" \
    contains "$out" "mesh ok: $2 on cuda:$(($1 - 1)), world nccl, groups nccl (rank $(($1 - 1)))"
}
if [ "$gpus" -lt 2 ]; then
  echo "nccl mesh: needs 2 GPUs, this machine shows $gpus (not run, not counted as passed)"
else
  nccl_mesh 2 tp2
  if [ "$gpus" -lt 4 ]; then
    echo "nccl mesh TP 2 x FSDP 2: needs 4 GPUs, this machine shows $gpus (not run, not counted as passed)"
  else
    nccl_mesh 4 tp2_fsdp2
  fi
fi
finish

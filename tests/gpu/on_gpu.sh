# Runs a launch test (tests/launch/) where a GPU is: there its recipes train
# on the GPU, since an Accelerator takes the GPU when one is visible.
#   bash tests/gpu/on_gpu.sh tests/launch/test_X.sh ACCEL_RUN SOURCE_ROOT
script=$1
shift
source "$(dirname "$0")/lib.sh"
bash "$script" "$accel_run" "$source_root"

// The settings a launcher hands its workers in environment variables, beyond
// the torchrun contract (RANK, WORLD_SIZE, MASTER_ADDR, ...), and how a
// worker reads them back. A worker started by accel-run gets its settings
// only this way: its command line carries just the recipe and its arguments.
//
//   ACCEL_THREADS                       intra-op threads of the rank
//   ACCEL_BACKEND                       gloo or mpi
//   ACCEL_TIMEOUT                       collective timeout, seconds
//   ACCEL_DEBUG                         1: check collectives across ranks
//   ACCEL_MIXED_PRECISION               the Accelerator's default, when configured
//   ACCEL_GRADIENT_ACCUMULATION_STEPS   the Accelerator's default, when configured
//   ACCEL_ZERO_STAGE                    1, 2 or 3: the Accelerator shards as DeepSpeed's
//                                       ZeRO by default (--zero-stage, --use-deepspeed)
//   ACCEL_ZERO3_INIT_FLAG               true or false (with ACCEL_ZERO_STAGE, when given):
//                                       at stage 3 acc:build_model builds empty off rank 0
//   ACCEL_USE_FSDP                      1: the Accelerator shards with FSDP by default
//   ACCEL_FSDP_SHARDING_STRATEGY        FULL_SHARD, SHARD_GRAD_OP or NO_SHARD
//   ACCEL_FSDP_AUTO_WRAP_POLICY         TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP or NO_WRAP
//   ACCEL_FSDP_TRANSFORMER_LAYER_CLS    class names, comma-separated: Block,Attention
//   ACCEL_FSDP_MIN_NUM_PARAMS           an integer
//   ACCEL_FSDP_CPU_OFFLOAD              true or false
//   ACCEL_FSDP_STATE_DICT_TYPE          FULL_STATE_DICT or SHARDED_STATE_DICT
//   ACCEL_FSDP_SYNC_MODULE_STATES       true or false (the workers refuse false)
//   ACCEL_FSDP_CPU_RAM_EFFICIENT_LOADING  true or false
//                                       (each ACCEL_FSDP_* only with FSDP, and only
//                                       when the launch gives it: the plugin's defaults
//                                       are the Lua side's)
//   ACCEL_RESTART_COUNT                 0 on the first start, k after the k-th restart
//   ACCEL_MAX_RESTARTS                  the --max-restarts in force
//   ACCEL_RDZV_TOKEN                    the secret the launcher's store wants
//                                       (engine/store/store_protocol.h)
//   ACCEL_SHM_PREFIX                    the run's shared memory names
//                                       (engine/launch/run_guardian.h)
#pragma once
#include <string>
#include <vector>

#include "engine/launch/launch_options.h"

namespace accel {

inline constexpr const char* kRestartCountVariable = "ACCEL_RESTART_COUNT";
inline constexpr const char* kRdzvTokenVariable = "ACCEL_RDZV_TOKEN";

// "NAME=value" for each setting of `options` a worker needs; the restart
// variables are the launcher's to add, per start.
std::vector<std::string> worker_variables(const LaunchOptions& options);

// Whether mpirun or srun started this process as one rank of several: its
// environment names an MPI rank (OpenMPI's, or PMI's with more than one
// task). A single task that srun starts is a launcher, as on one machine.
bool started_as_mpi_rank();

// Overrides the fields of `options` whose variable is set. Throws
// LaunchOptionsError naming a variable whose value is malformed.
void read_worker_variables(LaunchOptions& options);

}  // namespace accel

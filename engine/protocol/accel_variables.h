// Every ACCEL_* environment variable accel reads or sets, named once. Each
// is the contract between two processes (the launcher and its workers, a
// worker and its guardian) or a user's switch. The worker reads the
// launcher's into LaunchOptions (worker_variables.h) and hands them to Lua
// as one table, accel.core.launch; no Lua file reads them itself.
#pragma once

namespace accel::variables {

// Set by accel-run for its workers (worker_variables.cpp, run_command.cpp).
inline constexpr const char* kRole = "ACCEL_ROLE";                // worker | guardian
inline constexpr const char* kThreads = "ACCEL_THREADS";          // intra-op threads of the rank
inline constexpr const char* kBackend = "ACCEL_BACKEND";          // gloo | mpi | nccl
inline constexpr const char* kBackendGiven = "ACCEL_BACKEND_GIVEN";  // 1: --backend named it
inline constexpr const char* kTimeout = "ACCEL_TIMEOUT";          // collective timeout, seconds
inline constexpr const char* kDebug = "ACCEL_DEBUG";              // 1: check collectives across ranks
inline constexpr const char* kMixedPrecision = "ACCEL_MIXED_PRECISION";
inline constexpr const char* kGradientAccumulationSteps = "ACCEL_GRADIENT_ACCUMULATION_STEPS";
inline constexpr const char* kZeroStage = "ACCEL_ZERO_STAGE";     // 1-3: DeepSpeed's ZeRO
inline constexpr const char* kZero3InitFlag = "ACCEL_ZERO3_INIT_FLAG";  // true | false
inline constexpr const char* kUseFsdp = "ACCEL_USE_FSDP";         // 1: FSDP by default
// FSDP's settings, each only when the launch gives it.
inline constexpr const char* kFsdpShardingStrategy = "ACCEL_FSDP_SHARDING_STRATEGY";
inline constexpr const char* kFsdpAutoWrapPolicy = "ACCEL_FSDP_AUTO_WRAP_POLICY";
inline constexpr const char* kFsdpTransformerLayerCls = "ACCEL_FSDP_TRANSFORMER_LAYER_CLS";
inline constexpr const char* kFsdpMinNumParams = "ACCEL_FSDP_MIN_NUM_PARAMS";
inline constexpr const char* kFsdpCpuOffload = "ACCEL_FSDP_CPU_OFFLOAD";
inline constexpr const char* kFsdpStateDictType = "ACCEL_FSDP_STATE_DICT_TYPE";
inline constexpr const char* kFsdpSyncModuleStates = "ACCEL_FSDP_SYNC_MODULE_STATES";
inline constexpr const char* kFsdpCpuRamEfficientLoading = "ACCEL_FSDP_CPU_RAM_EFFICIENT_LOADING";
// The mesh's sizes (Accelerate's PARALLELISM_CONFIG_*_SIZE), each only when the launch gives it.
inline constexpr const char* kParallelismDpReplicateSize = "ACCEL_PARALLELISM_CONFIG_DP_REPLICATE_SIZE";
inline constexpr const char* kParallelismDpShardSize = "ACCEL_PARALLELISM_CONFIG_DP_SHARD_SIZE";
inline constexpr const char* kParallelismCpSize = "ACCEL_PARALLELISM_CONFIG_CP_SIZE";
inline constexpr const char* kParallelismTpSize = "ACCEL_PARALLELISM_CONFIG_TP_SIZE";
inline constexpr const char* kParallelismPpSize = "ACCEL_PARALLELISM_CONFIG_PP_SIZE";
inline constexpr const char* kParallelismEpSize = "ACCEL_PARALLELISM_CONFIG_EP_SIZE";
inline constexpr const char* kParallelismPpSchedule = "ACCEL_PARALLELISM_CONFIG_PP_SCHEDULE";
inline constexpr const char* kParallelismPpMicrobatches = "ACCEL_PARALLELISM_CONFIG_PP_MICROBATCHES";
inline constexpr const char* kParallelismPpVirtualStages = "ACCEL_PARALLELISM_CONFIG_PP_VIRTUAL_STAGES";
inline constexpr const char* kRestartCount = "ACCEL_RESTART_COUNT";  // 0, then k after the k-th restart
inline constexpr const char* kMaxRestarts = "ACCEL_MAX_RESTARTS";
inline constexpr const char* kRdzvToken = "ACCEL_RDZV_TOKEN";     // the store's secret (store_protocol.h)
inline constexpr const char* kShmPrefix = "ACCEL_SHM_PREFIX";     // the run's shared memory names
inline constexpr const char* kErrorFile = "ACCEL_ERROR_FILE";     // where a rank writes its failure (error_file.h)
inline constexpr const char* kErrorDir = "ACCEL_ERROR_DIR";       // the error files' folder under mpirun
inline constexpr const char* kControlFd = "ACCEL_CONTROL_FD";     // a warm worker's socket (warm_protocol.h)

// The user's switches.
inline constexpr const char* kConfigFile = "ACCEL_CONFIG_FILE";   // the config file, when --config is not given
inline constexpr const char* kLuaPath = "ACCEL_LUA_PATH";         // the Lua library, instead of the built-in path
inline constexpr const char* kSharedMemory = "ACCEL_SHARED_MEMORY";  // 0: no shared-memory all-reduce
inline constexpr const char* kCpuAllocator = "ACCEL_CPU_ALLOCATOR";  // system: LibTorch's own CPU allocator
inline constexpr const char* kReplHistory = "ACCEL_REPL_HISTORY";  // the REPL's history file
inline constexpr const char* kFaultInject = "ACCEL_FAULT_INJECT";  // tests: fail a checkpoint step
inline constexpr const char* kLogLevel = "ACCEL_LOG_LEVEL";        // read by lua/accel/logging.lua

}  // namespace accel::variables

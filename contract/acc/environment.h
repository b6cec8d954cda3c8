#pragma once
// The environment contract between a launcher and the runtime: the variables acc-launch sets for
// every rank and that acc::Accelerator reads. They are torchrun's and Accelerate's own names, so
// torchrun or `accelerate launch` start acc programs, and acc-launch starts PyTorch programs.
//
// This header is the contract between the launcher and the runtime (docs/architecture.md; the launch
// code both run is common/, acc_common): it is torch-free and holds names and defaults only. Tests spell the names out literally, so that a
// change here that breaks compatibility with torchrun or Accelerate fails them.
namespace acc::env {

// --- torchrun (torch.distributed.run) -----------------------------------------------------------
inline constexpr const char* kRank = "RANK";
inline constexpr const char* kLocalRank = "LOCAL_RANK";
inline constexpr const char* kWorldSize = "WORLD_SIZE";
inline constexpr const char* kLocalWorldSize = "LOCAL_WORLD_SIZE";
inline constexpr const char* kGroupRank = "GROUP_RANK";
inline constexpr const char* kMasterAddr = "MASTER_ADDR";
inline constexpr const char* kMasterPort = "MASTER_PORT";
inline constexpr const char* kRestartCount = "TORCHELASTIC_RESTART_COUNT";
inline constexpr const char* kMaxRestarts = "TORCHELASTIC_MAX_RESTARTS";
/// torchrun's job id (`--rdzv-id`; "none" when not given). acc reads it as the job id when
/// ACC_JOB_ID is unset.
inline constexpr const char* kRunId = "TORCHELASTIC_RUN_ID";
/// "True" when torchrun's agent serves the store at MASTER_ADDR:MASTER_PORT: every rank, rank 0
/// too, then joins it as a client.
inline constexpr const char* kUseAgentStore = "TORCHELASTIC_USE_AGENT_STORE";
/// The rendezvous port on the main machine when none is given (torchrun's and Accelerate's).
inline constexpr int kDefaultMainProcessPort = 29500;

// --- acc's rendezvous (set by acc-launch and acc::launch; optional for other launchers) ----------
/// A descriptor, inherited by rank 0 only, of a TCP socket already bound to MASTER_ADDR:MASTER_PORT
/// and listening: rank 0 serves the store on it, so the port is reserved from before any rank
/// starts until the job ends (no window in which another job can take it).
inline constexpr const char* kStoreListenFd = "ACC_STORE_LISTEN_FD";
/// The job's id, the same on every rank of a job and different between jobs: checked at rendezvous,
/// so that a rank can never join another job's store.
inline constexpr const char* kJobId = "ACC_JOB_ID";
/// A secret shared by every rank of a multi-machine job: a client that cannot prove it knows it
/// is refused by rank 0's store.
inline constexpr const char* kStoreSecret = "ACC_STORE_SECRET";

// --- acc's runtime ------------------------------------------------------------------------------
/// Whether libacc loads its CUDA part (libacc_cuda.so: libtorch_cuda, cuBLAS, cuDNN, NCCL) when it
/// is loaded: `auto` (unset) when a GPU driver is present and ACCELERATE_USE_CPU is not set, `1`
/// always, `0` never.
inline constexpr const char* kLoadCuda = "ACC_LOAD_CUDA";

// --- Accelerate (accelerate launch) -------------------------------------------------------------
inline constexpr const char* kUseCpu = "ACCELERATE_USE_CPU";
inline constexpr const char* kMixedPrecision = "ACCELERATE_MIXED_PRECISION";
inline constexpr const char* kGradientAccumulationSteps = "ACCELERATE_GRADIENT_ACCUMULATION_STEPS";
inline constexpr const char* kDebugMode = "ACCELERATE_DEBUG_MODE";
inline constexpr const char* kTorchDevice = "ACCELERATE_TORCH_DEVICE";
inline constexpr const char* kUseFsdp = "ACCELERATE_USE_FSDP";

// --- Accelerate's FullyShardedDataParallelPlugin --------------------------------------------------
inline constexpr const char* kFsdpVersion = "FSDP_VERSION";
inline constexpr const char* kFsdpShardingStrategy = "FSDP_SHARDING_STRATEGY";
inline constexpr const char* kFsdpReshardAfterForward = "FSDP_RESHARD_AFTER_FORWARD";
inline constexpr const char* kFsdpOffloadParams = "FSDP_OFFLOAD_PARAMS";
inline constexpr const char* kFsdpMinNumParams = "FSDP_MIN_NUM_PARAMS";
inline constexpr const char* kFsdpAutoWrapPolicy = "FSDP_AUTO_WRAP_POLICY";
inline constexpr const char* kFsdpTransformerClsToWrap = "FSDP_TRANSFORMER_CLS_TO_WRAP";
inline constexpr const char* kFsdpBackwardPrefetch = "FSDP_BACKWARD_PREFETCH";
inline constexpr const char* kFsdpStateDictType = "FSDP_STATE_DICT_TYPE";
inline constexpr const char* kFsdpForwardPrefetch = "FSDP_FORWARD_PREFETCH";
inline constexpr const char* kFsdpUseOrigParams = "FSDP_USE_ORIG_PARAMS";
inline constexpr const char* kFsdpCpuRamEfficientLoading = "FSDP_CPU_RAM_EFFICIENT_LOADING";
inline constexpr const char* kFsdpSyncModuleStates = "FSDP_SYNC_MODULE_STATES";
inline constexpr const char* kFsdpActivationCheckpointing = "FSDP_ACTIVATION_CHECKPOINTING";
inline constexpr const char* kFsdpActivationCheckpointingOffload = "FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD";

}  // namespace acc::env

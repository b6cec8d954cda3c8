#pragma once
// The process group acc runs on: a TCPStore rendezvous served by rank 0, Gloo for CPU tensors and
// NCCL (or, when asked, Gloo) for CUDA tensors. Every blocking call has a deadline and turns failures into
// acc::DistributedError naming the operation, the rank and the timeout.
#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <acc/launch_info.h>

namespace acc::detail {

class RingCollectives;
using Milliseconds = std::chrono::milliseconds;

// Where Gloo listens (common::choose_gloo_network): an interface, else an address, else the host name's.
struct GlooDevice {
  std::string interface;
  std::string address;
  std::string description;  // said when a connection fails
};

// Defined in gloo_backend.cpp, the only file of libacc that sees Gloo's headers.
c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size, Milliseconds timeout,
                                                    const GlooDevice& device);

// NCCL and the CUDA queries are in libacc_cuda.so (cuda_module.cpp), which registers them when it is
// loaded (cuda/cuda_support.h). Without it, the functions below throw, saying why it was not loaded.
struct CudaModule {
  c10::intrusive_ptr<c10d::Backend> (*make_nccl)(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                 int size, Milliseconds timeout);
  std::string (*gpu_uuid)(int device_index);
};
void register_cuda_module(const CudaModule& module);
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size, Milliseconds timeout);
/// "GPU-xxxxxxxx-...", as nvidia-smi -L: the same for one physical GPU in every process.
std::string gpu_uuid(int device_index);

/// Which backend carries CUDA tensors. CPU tensors always go through Gloo.
enum class CudaCollectives {
  kNone,  // a CPU process: a CUDA tensor in a collective is an error
  kNccl,  // one GPU per rank (checked when the group starts)
  kGloo,  // Gloo's CUDA path (through host memory): ranks may share a GPU
};

/// Gloo has no 600 s default of its own; these are Accelerate's (InitProcessGroupKwargs).
constexpr Milliseconds kDefaultGlooTimeout{1800 * 1000};
constexpr Milliseconds kDefaultNcclTimeout{600 * 1000};
/// When a rank waiting in a collective says where it waits (AcceleratorOptions::stall_report_interval).
constexpr Milliseconds kDefaultStallReportInterval{60 * 1000};

class ProcessGroup {
 public:
  /// Joins the rendezvous described by `launch`. With kNccl it also checks that no two ranks share
  /// a GPU (this process's is the current CUDA device) and creates the NCCL backend.
  ProcessGroup(const LaunchInfo& launch, CudaCollectives cuda, std::optional<Milliseconds> timeout);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  /// A group of the parent's `ranks` (this process among them, the same list on every member),
  /// rendezvousing on the parent's store under `name`, which must be unique per group.
  std::unique_ptr<ProcessGroup> subgroup(const std::vector<int>& ranks, const std::string& name);

  int rank() const { return rank_; }
  int size() const { return size_; }
  c10d::Store& store() { return *store_; }

  /// The backend that moves tensors like `like` (for CUDA tensors: NCCL unless Gloo was asked for).
  c10d::Backend& backend_for(const at::Tensor& like);
  Milliseconds timeout_for(const at::Tensor& like) const;

  /// After this long in one collective that blocks the host (Gloo, acc's rings), the rank says once
  /// where it waits and which ranks have not reached it, then waits on until the timeout. Zero: never.
  void set_stall_report_interval(Milliseconds interval) { stall_report_interval_ = interval; }

  /// Waits for `work`; any failure or expired deadline throws DistributedError about `what`, naming
  /// the ranks that were not in it (comm/rank_positions.h).
  /// `operand` ("float[3]"), when given, is part of this rank's position: ranks in the same collective
  /// with tensors of different sizes called different ones.
  void wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what, Milliseconds timeout,
            const std::string& operand = {}) const;
  /// Rethrows the current exception as DistributedError about `what`.
  [[noreturn]] void fail(const std::string& what, Milliseconds timeout,
                         const std::string& cause) const;

  // Blocking collectives over one tensor (in place where the name says so).
  void all_reduce_(at::Tensor& tensor, c10d::ReduceOp op, const std::string& what);
  void broadcast_(at::Tensor& tensor, int root, const std::string& what);
  /// Same-shaped tensors from every rank, in rank order.
  std::vector<at::Tensor> all_gather(const at::Tensor& tensor, const std::string& what);
  void barrier(const std::string& what);
  /// Every rank's `value`, exchanged through the store (small strings: metadata, not tensors).
  std::vector<std::string> all_gather_strings(const std::string& value, const std::string& what);

  /// Flat collectives over size() equal chunks of a 1-D buffer, launched without waiting, in the
  /// order called (the same on every rank). CPU buffers go round rings of send/recv on this
  /// group's ring thread (ring_collectives.h: Gloo's own versions copy and all-reduce the whole
  /// buffer), CUDA buffers to backend_for().
  /// `output` = this rank's chunk of the SUM of every rank's `input`; `input` may be overwritten.
  c10::intrusive_ptr<c10d::Work> reduce_scatter_flat(const at::Tensor& output, const at::Tensor& input);
  /// Every chunk of `flat` from its owner; chunk rank() already holds this rank's.
  c10::intrusive_ptr<c10d::Work> all_gather_flat(const at::Tensor& flat);

  /// Collectives issued by this process so far (diagnostics: tests prove that accumulation
  /// steps communicate nothing). Every collective goes through launched().
  uint64_t num_collectives() const { return num_collectives_; }
  /// Counts and returns `work` (for collectives launched directly on a backend).
  const c10::intrusive_ptr<c10d::Work>& launched(const c10::intrusive_ptr<c10d::Work>& work) {
    ++num_collectives_;
    return work;
  }

 private:
  ProcessGroup(const ProcessGroup& parent, int rank, int size, c10::intrusive_ptr<c10d::Store> store);
  void create_backends();
  RingCollectives& ring();  // started by the first flat CPU collective
  /// After a failed collective: "; this rank was in ...: rank 2 has not reached it ..." naming the
  /// peers that did not fail in it too, or "" when all did.
  /// Replaces `cause` (the backend's error) when the ranks are in different collectives.
  std::string absent_peers(const std::string& where, Milliseconds timeout, std::string& cause) const;
  /// The first part of wait(): reports a stall once; returns the time left for the rest of the wait
  /// (1 ms when the work has completed). `posted`: this rank's position is in the store.
  /// `wait_for(slice)` waits up to `slice` and says whether the exchange has completed.
  Milliseconds wait_and_report_stall(const std::function<bool(Milliseconds)>& wait_for, const std::string& what,
                                     Milliseconds timeout, bool& posted) const;
  /// This rank's place in the job's sequence of exchanges (collectives and string exchanges), which
  /// every rank running the same program reaches with the same operation.
  uint64_t position() const { return num_collectives_ + store_round_; }

  int rank_;
  int size_;
  CudaCollectives cuda_;
  Milliseconds gloo_timeout_;
  Milliseconds nccl_timeout_;
  Milliseconds stall_report_interval_{kDefaultStallReportInterval};
  uint64_t store_round_ = 0;
  uint64_t num_collectives_ = 0;
  GlooDevice gloo_device_;
  std::shared_ptr<void> store_access_;  // rank 0's gate (with a secret): declared first, destroyed last
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Backend> gloo_;
  c10::intrusive_ptr<c10d::Backend> nccl_;
  std::unique_ptr<RingCollectives> ring_;
};

/// The text of an exception without libtorch's C++ backtrace.
std::string error_text(const std::exception& error);
/// "5 s", or "1500 ms" when not whole seconds.
std::string seconds_text(Milliseconds timeout);

}  // namespace acc::detail

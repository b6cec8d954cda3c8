#pragma once
// Process-wide distributed state, shared by every Accelerator in the process (Accelerate's
// PartialState): launch information, device, and the process group.
#include <c10/core/Device.h>

#include <memory>

#include <acc/launch_info.h>
#include <acc/options.h>

namespace acc {

namespace detail {
class ProcessGroup;
struct SharedState;
}  // namespace detail

class PartialState {
 public:
  /// The first construction in a process detects the launch and joins the process group (all
  /// ranks must construct it); later constructions share that state, and their `cpu` and
  /// `timeout` options must agree with the first.
  explicit PartialState(const AcceleratorOptions& options = {});

  const LaunchInfo& launch() const;
  c10::Device device() const;
  DistributedType distributed_type() const;
  int num_processes() const;
  int process_index() const;
  int local_process_index() const;
  bool is_main_process() const { return process_index() == 0; }
  bool is_local_main_process() const { return local_process_index() == 0; }
  bool is_last_process() const { return process_index() == num_processes() - 1; }
  bool use_distributed() const { return num_processes() > 1; }

  /// Barrier; a no-op on one process.
  void wait_for_everyone() const;
  /// Collectives this process has issued (0 on one process): a diagnostic, e.g. to check that
  /// steps inside no_sync or accumulate() communicate nothing.
  uint64_t num_collectives() const;
  /// The process group; nullptr on a single process.
  detail::ProcessGroup* process_group() const;

  /// Leaves the process group (Accelerate's end_training / destroy_process_group). Later
  /// PartialStates create a fresh one.
  static void destroy();

 private:
  std::shared_ptr<detail::SharedState> shared_;
};

}  // namespace acc

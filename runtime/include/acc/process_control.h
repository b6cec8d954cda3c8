#pragma once
// Ordering guards and data splitting across processes (Accelerate's main_process_first and
// split_between_processes).
#include <ATen/core/Tensor.h>

#include <vector>

#include <acc/errors.h>
#include <acc/state.h>

namespace acc {

/// Lets the chosen process run a block first: the others wait at a barrier on entry, the chosen
/// one waits at the same barrier on exit. Each rank passes exactly one barrier.
class ProcessOrderGuard {
 public:
  ProcessOrderGuard(const PartialState& state, bool goes_first);
  ~ProcessOrderGuard() noexcept(false);
  ProcessOrderGuard(ProcessOrderGuard&& other) noexcept;
  ProcessOrderGuard(const ProcessOrderGuard&) = delete;
  ProcessOrderGuard& operator=(const ProcessOrderGuard&) = delete;
  ProcessOrderGuard& operator=(ProcessOrderGuard&&) = delete;

 private:
  const PartialState* state_;
  bool goes_first_;
};

/// The [start, start + length) share of `total` items for `process` of `num_processes`:
/// start = p*q + min(p, r), length = q + (p < r), with q, r = divmod(total, num_processes).
std::pair<int64_t, int64_t> process_share(int64_t total, int num_processes, int process);

/// This process's share of `inputs`; with `apply_padding` every share has the length of the
/// largest, padded by repeating the last element (so gathered results can be trimmed).
template <typename T>
std::vector<T> split_between_processes(const std::vector<T>& inputs, int num_processes,
                                       int process, bool apply_padding = false) {
  auto [start, length] = process_share(static_cast<int64_t>(inputs.size()), num_processes, process);
  std::vector<T> share(inputs.begin() + start, inputs.begin() + start + length);
  const int64_t longest = process_share(static_cast<int64_t>(inputs.size()), num_processes, 0).second;
  if (apply_padding && !inputs.empty()) {
    while (static_cast<int64_t>(share.size()) < longest) share.push_back(inputs.back());
  }
  return share;
}
at::Tensor split_between_processes(const at::Tensor& inputs, int num_processes, int process,
                                   bool apply_padding = false);

/// Seeds torch's CPU and CUDA generators; device_specific adds the process index (Accelerate's
/// set_seed), so that ranks draw different random numbers.
void set_seed(uint64_t seed, bool device_specific = false);

}  // namespace acc

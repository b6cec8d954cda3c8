#include <acc/process_control.h>

#include <ATen/Context.h>
#include <ATen/ops/cat.h>
#include <torch/cuda.h>

#include <algorithm>

namespace acc {

ProcessOrderGuard::ProcessOrderGuard(const PartialState& state, bool goes_first)
    : state_(&state), goes_first_(goes_first) {
  if (!goes_first_) state_->wait_for_everyone();
}

ProcessOrderGuard::~ProcessOrderGuard() noexcept(false) {
  // A guard unwinding from an exception must not add a barrier the other ranks never reach.
  if (state_ != nullptr && goes_first_ && std::uncaught_exceptions() == 0) {
    state_->wait_for_everyone();
  }
}

ProcessOrderGuard::ProcessOrderGuard(ProcessOrderGuard&& other) noexcept
    : state_(other.state_), goes_first_(other.goes_first_) {
  other.state_ = nullptr;
}

std::pair<int64_t, int64_t> process_share(int64_t total, int num_processes, int process) {
  const int64_t q = total / num_processes;
  const int64_t r = total % num_processes;
  return {process * q + std::min<int64_t>(process, r), q + (process < r ? 1 : 0)};
}

at::Tensor split_between_processes(const at::Tensor& inputs, int num_processes, int process,
                                   bool apply_padding) {
  if (inputs.dim() == 0) {
    throw ConfigError("acc: split_between_processes needs a tensor with a first dimension");
  }
  auto [start, length] = process_share(inputs.size(0), num_processes, process);
  auto share = inputs.narrow(0, start, length);
  const int64_t longest = process_share(inputs.size(0), num_processes, 0).second;
  if (apply_padding && length < longest && inputs.size(0) > 0) {
    auto last = inputs.narrow(0, inputs.size(0) - 1, 1);
    std::vector<at::Tensor> parts{share};
    for (int64_t i = length; i < longest; ++i) parts.push_back(last);
    share = at::cat(parts, 0);
  }
  return share;
}

void set_seed(uint64_t seed, bool device_specific) {
  if (device_specific) seed += static_cast<uint64_t>(PartialState().process_index());
  at::manual_seed(seed);  // seeds CPU and every CUDA device
}

}  // namespace acc

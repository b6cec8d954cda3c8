// A stand-in for the acc runtime's API as acc-migrate writes it, so migrated test files parse again.
#pragma once
#include <acc/hooks.h>
#include <torch/torch.h>

namespace acc {
struct AcceleratorOptions {
  AcceleratorOptions &step_scheduler_with_optimizer(bool) { return *this; }
};
class Accelerator {
 public:
  // acc's headers use constexpr: include-acc.cpp checks that a project's `#define constexpr` comes after.
  static constexpr int kMainProcessIndex = 0;
  Accelerator(AcceleratorOptions = {}) {}
  c10::Device device() const { return c10::Device(c10::kCPU); }
  template <typename... Objects> void prepare(Objects &...) {}
  template <typename Sampler = torch::data::samplers::RandomSampler, typename... Args>
  std::unique_ptr<torch::data::DataLoaderBase<std::vector<torch::data::Example<>>>> prepare_data_loader(Args &&...) {
    return nullptr;
  }
  template <typename... Args> void backward(const at::Tensor &, Args &&...) {}
  double clip_grad_norm_(std::vector<at::Tensor>, double) { return 0; }
  void clip_grad_value_(std::vector<at::Tensor>, double) {}
  int process_index() const { return 0; }
  bool is_main_process() const { return true; }
  bool is_local_main_process() const { return true; }
  void wait_for_everyone() {}
  template <typename... Args> void print(Args &&...) {}
  template <typename T> T gather_for_metrics(const T &) const;
};
template <typename Opt> class Optimizer : public Opt { public: using Opt::Opt; };
template <typename Sched> class Scheduler : public Sched { public: using Sched::Sched; };
}  // namespace acc

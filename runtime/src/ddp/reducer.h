#pragma once
// DDP's gradient reducer for a model prepared in place: hooks on each parameter's gradient
// accumulator copy gradients into flat buckets and launch each bucket's all-reduce as soon as it
// is full, while the rest of backward runs; a callback at the end of backward waits for the
// buckets, writes the averaged gradients into .grad and broadcasts buffers.
#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <memory>
#include <string>
#include <vector>

#include <acc/options.h>

#include "parallel/gradient_sync.h"

namespace acc::detail {

class ProcessGroup;

class Reducer : public GradientSync {
 public:
  using WeakTensorImpl = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
  /// `parameters` in registration order (only those that require grad); `buffers` are broadcast
  /// from rank 0 after each synchronising backward when options.broadcast_buffers().
  Reducer(std::vector<NamedTensor> parameters, std::vector<at::Tensor> buffers,
          ProcessGroup& group, const DistributedDataParallelKwargs& options);
  ~Reducer() override;

 private:
  struct Bucket {
    // The members' gradients, concatenated. A bucket `in_place` (one large gradient) has no storage
    // of its own: `flat` is that gradient, reduced where it lies (no copy in, none back), set in
    // on_gradient_ready and dropped by reset().
    at::Tensor flat;
    bool in_place = false;
    std::vector<size_t> members;   // indices into params_
    std::vector<int64_t> offsets;  // element offset of each member in `flat`
    size_t pending = 0;            // members whose gradient is not ready in this backward
    c10::intrusive_ptr<c10d::Work> work;
    // An in-place bucket's gradient after the last reduction (gradient_as_bucket_view only): still
    // .grad at the next one means torch would have kept it as its bucket view.
    WeakTensorImpl last_gradient{c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>()};
  };
  void build_buckets();
  at::Tensor slot(size_t param);
  void on_gradient_ready(size_t param) override;
  void mark_ready(size_t param);
  void launch_ready_buckets();
  void finish_backward() override;
  void wait_all(bool rethrow);
  void write_back(const std::vector<bool>& globally_used);
  std::vector<bool> globally_used();
  std::string describe_unused(const std::vector<size_t>& unused) const;
  void reset();

  std::vector<NamedTensor> params_;
  std::vector<at::Tensor> buffers_;
  ProcessGroup& group_;
  DistributedDataParallelKwargs options_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;
  std::vector<size_t> slot_of_;
  std::vector<bool> ready_;
  std::vector<bool> used_;
  size_t next_to_launch_ = 0;
};

}  // namespace acc::detail

#include "ddp/reducer.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/set.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>

#include <sstream>

#include <acc/detail/bucket_size.h>
#include <acc/errors.h>

#include "comm/process_group.h"
#include "ddp/bucket_plan.h"
#include "parallel/model_sync.h"

namespace acc::detail {

Reducer::Reducer(std::vector<NamedTensor> parameters, std::vector<at::Tensor> buffers,
                 ProcessGroup& group, const DistributedDataParallelKwargs& options)
    : params_(std::move(parameters)),
      buffers_(std::move(buffers)),
      group_(group),
      options_(options),
      ready_(params_.size(), false),
      used_(params_.size(), false) {
  build_buckets();  // bucket sizes were checked by resolve_options
  attach_hooks(params_);
}

Reducer::~Reducer() { detach_hooks(); }

namespace {
// A gradient this large is all-reduced where it lies instead of through a bucket: copying it into a
// bucket and back costs two passes over its bytes, more than the latency of a collective of its own
// (~0.1 ms on loopback; a 4 MiB copy in and out is ~1 ms). On the 50M-parameter MLP of
// bench/ddp/ddp_step.cpp that is most of DDP's cost beyond compute and one all-reduce.
constexpr size_t kReducedInPlaceBytes = 4u << 20;
}  // namespace

void Reducer::build_buckets() {
  std::vector<BucketInput> inputs;
  for (const auto& p : params_) {
    const auto bytes = static_cast<size_t>(p.tensor.numel() * p.tensor.element_size());
    inputs.push_back({std::string(c10::toString(p.tensor.scalar_type())) + "@" + p.tensor.device().str(),
                      bytes, bytes >= kReducedInPlaceBytes});
  }
  auto layout = plan_buckets(inputs, static_cast<size_t>(mib_to_bytes(options_.bucket_cap_mb())),
                             static_cast<size_t>(mib_to_bytes(options_.first_bucket_cap_mb())));

  bucket_of_.assign(params_.size(), 0);
  slot_of_.assign(params_.size(), 0);
  for (auto& members : layout) {
    Bucket bucket;
    int64_t numel = 0;
    for (size_t j = 0; j < members.size(); ++j) {
      bucket_of_[members[j]] = buckets_.size();
      slot_of_[members[j]] = j;
      bucket.offsets.push_back(numel);
      numel += params_[members[j]].tensor.numel();
    }
    bucket.in_place = members.size() == 1 && inputs[members.front()].alone;
    if (!bucket.in_place) bucket.flat = at::zeros({numel}, params_[members.front()].tensor.options());
    bucket.members = std::move(members);
    bucket.pending = bucket.members.size();
    buckets_.push_back(std::move(bucket));
  }
}

at::Tensor Reducer::slot(size_t param) {
  auto& bucket = buckets_[bucket_of_[param]];
  const auto& p = params_[param].tensor;
  // An in-place bucket whose gradient could not be used (absent, or not contiguous): storage of
  // its own for this backward.
  if (!bucket.flat.defined()) bucket.flat = at::zeros({p.numel()}, p.options());
  return bucket.flat.narrow(0, bucket.offsets[slot_of_[param]], p.numel()).view(p.sizes());
}

void Reducer::on_gradient_ready(size_t param) {
  if (ready_[param]) return;
  const auto& grad = params_[param].tensor.grad();
  if (grad.is_sparse()) {
    throw Error("acc: parameter '" + params_[param].name +
                "' has a sparse gradient, which DDP in acc does not reduce; construct the "
                "embedding with sparse(false)");
  }
  // A large gradient is its bucket (reduced where it lies); otherwise it goes into its slot. Either
  // way it is averaged on the way, in one pass, with torch DDP's arithmetic (they differ in the last
  // bit for world sizes that are not powers of two): a gradient made by this backward is multiplied
  // by 1/world as it is copied into its bucket; one that already was its bucket view
  // (gradient_as_bucket_view, kept since the last step) is divided by world.
  auto& bucket = buckets_[bucket_of_[param]];
  const bool kept_as_view = options_.gradient_as_bucket_view() && bucket.in_place &&
                            bucket.last_gradient.lock().get() == grad.unsafeGetTensorImpl();
  if (bucket.in_place && grad.is_contiguous() && grad.scalar_type() == params_[param].tensor.scalar_type()) {
    bucket.flat = grad.view({-1});
  }
  auto destination = slot(param);
  const bool same_storage = destination.data_ptr() == grad.data_ptr();
  if (same_storage && (kept_as_view || !bucket.in_place)) {
    destination.div_(group_.size());  // only gradient_as_bucket_view gets here for a bucketed slot
  } else if (same_storage) {
    destination.mul_(1.0 / group_.size());
  } else {
    at::mul_out(destination, grad, 1.0 / group_.size());
  }
  used_[param] = true;
  mark_ready(param);
}

void Reducer::mark_ready(size_t param) {
  ready_[param] = true;
  if (--buckets_[bucket_of_[param]].pending == 0) launch_ready_buckets();
}

void Reducer::launch_ready_buckets() {
  // Buckets are launched strictly in index order so that every rank issues the same sequence of
  // collectives, whatever order its hooks fire in.
  while (next_to_launch_ < buckets_.size() && buckets_[next_to_launch_].pending == 0) {
    auto& bucket = buckets_[next_to_launch_];
    std::vector<at::Tensor> tensors{bucket.flat};
    c10d::AllreduceOptions options;
    options.timeout = group_.timeout_for(bucket.flat);
    bucket.work = group_.launched(group_.backend_for(bucket.flat).allreduce(tensors, options));
    ++next_to_launch_;
  }
}

void Reducer::wait_all(bool rethrow) {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    auto& bucket = buckets_[b];
    if (!bucket.work) continue;
    auto work = std::move(bucket.work);
    try {
      group_.wait(work, "DDP gradient all-reduce (bucket " + std::to_string(b + 1) + " of " +
                            std::to_string(buckets_.size()) + ")",
                  group_.timeout_for(bucket.flat));
    } catch (...) {
      if (rethrow) throw;
    }
  }
}

std::string Reducer::describe_unused(const std::vector<size_t>& unused) const {
  std::ostringstream out;
  out << "acc: DDP: " << unused.size() << " parameter" << (unused.size() == 1 ? "" : "s")
      << " received no gradient in this backward pass on rank " << group_.rank() << ": ";
  for (size_t i = 0; i < unused.size() && i < 10; ++i) out << (i ? ", " : "") << params_[unused[i]].name;
  if (unused.size() > 10) out << ", ...";
  out << ". Use every parameter in the loss, set requires_grad(false) on frozen ones, or pass "
         "AcceleratorOptions().ddp(acc::DistributedDataParallelKwargs().find_unused_parameters("
         "true)).";
  return out.str();
}

std::vector<bool> Reducer::globally_used() {
  auto flags = at::empty({static_cast<int64_t>(used_.size())}, at::TensorOptions().dtype(at::kInt));
  auto* data = flags.data_ptr<int>();
  for (size_t i = 0; i < used_.size(); ++i) data[i] = used_[i] ? 1 : 0;
  group_.all_reduce_(flags, c10d::ReduceOp::MAX, "DDP unused-parameter exchange");
  std::vector<bool> result(used_.size());
  for (size_t i = 0; i < used_.size(); ++i) result[i] = data[i] != 0;
  return result;
}

void Reducer::finish_backward() {
  std::vector<size_t> unused;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!ready_[i]) unused.push_back(i);
  }
  if (!unused.empty() && !options_.find_unused_parameters()) {
    // Every rank that skipped the same parameters stops here alike; drain what was launched so
    // the process group stays usable for the error path.
    wait_all(/*rethrow=*/false);
    reset();
    throw DistributedError(describe_unused(unused));
  }
  try {
    for (size_t i : unused) {
      slot(i).zero_();
      mark_ready(i);
    }
    std::vector<bool> used(params_.size(), true);
    if (options_.find_unused_parameters()) used = globally_used();
    wait_all(/*rethrow=*/true);
    write_back(used);
    if (options_.broadcast_buffers() && !buffers_.empty()) {
      broadcast_coalesced(group_, buffers_, 0, "DDP buffer broadcast");
    }
  } catch (...) {
    wait_all(/*rethrow=*/false);
    reset();
    throw;
  }
  reset();
}

namespace {
// A tensor on `view`'s bytes that autograd does not count as a view. A gradient that is a view
// breaks libtorch's Optimizer::zero_grad, which detach_()es every gradient in place ("Can't detach
// views in-place"); Python's zero_grad avoids detach_ there, the C++ one cannot be changed.
at::Tensor same_bytes(const at::Tensor& view) {
  return at::empty({0}, view.options()).set_(view.storage(), view.storage_offset(), view.sizes(), view.strides());
}
}  // namespace

void Reducer::write_back(const std::vector<bool>& globally_used) {
  c10::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!globally_used[i]) continue;  // as torch DDP: no rank used it, so it keeps no gradient
    auto& param = params_[i].tensor;
    auto reduced = slot(i);
    auto& grad = param.mutable_grad();
    if (grad.defined() && grad.data_ptr() == reduced.data_ptr()) continue;  // reduced in place
    if (options_.gradient_as_bucket_view()) {
      grad = same_bytes(reduced);
    } else if (grad.defined()) {
      grad.copy_(reduced);  // the user's gradient tensor stays the same object
    } else {
      // An in-place bucket's own storage was made for this backward alone (reset() drops it).
      grad = buckets_[bucket_of_[i]].in_place ? same_bytes(reduced) : reduced.clone();
    }
  }
}

void Reducer::reset() {
  std::fill(ready_.begin(), ready_.end(), false);
  std::fill(used_.begin(), used_.end(), false);
  for (auto& bucket : buckets_) {
    bucket.pending = bucket.members.size();
    if (bucket.in_place) {
      bucket.flat = at::Tensor();  // the gradient is the user's again
      if (options_.gradient_as_bucket_view()) {
        // Torch's bucket view would be this gradient from now on: if it is still .grad at the next
        // synchronising backward, torch divides it in place (on_gradient_ready).
        bucket.last_gradient = WeakTensorImpl(params_[bucket.members.front()].tensor.grad().getIntrusivePtr());
      }
    }
  }
  next_to_launch_ = 0;
}

}  // namespace acc::detail

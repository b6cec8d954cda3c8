// Empty construction by dispatch keys rather than by patching modules (Python's
// init_empty_weights patches Module.register_parameter; C++ modules have nothing to patch).
//
// Why it is sound: a factory function (torch::empty, torch::ones, torch::randn, ...) has no tensor
// argument to dispatch on, so the dispatcher first runs its BackendSelect kernel, which picks the
// backend from the TensorOptions. With BackendSelect excluded and Meta included in this thread's
// local dispatch key set, the dispatcher goes straight to the Meta kernel instead, and Meta kernels
// produce meta tensors whatever device the options name. Every later operation on those tensors
// (kaiming_uniform_, fill_, normal_ under NoGradGuard) dispatches on the tensor's own Meta key and
// only computes shapes. Nothing of the module changes: the same constructors run, with the same
// shapes, dtypes, names and requires_grad.
#include <acc/big_modeling.h>

#include <c10/core/impl/LocalDispatchKeySet.h>

#include <acc/errors.h>

namespace acc {

namespace {

const c10::DispatchKeySet kMetaKeys(c10::DispatchKey::Meta);
const c10::DispatchKeySet kBackendSelect(c10::DispatchKey::BackendSelect);

}  // namespace

init_on_device::init_on_device(c10::Device device) : init_on_device(device, true) {}

init_on_device::init_on_device(c10::Device device, bool enabled) {
  if (device.type() != c10::kMeta && device.type() != c10::kCPU) {
    throw ConfigError("acc::init_on_device(" + device.str() +
                      "): libtorch has no default device to build modules on; build the model "
                      "inside acc::init_empty_weights and place it with acc::dispatch_model or "
                      "acc::load_checkpoint_and_dispatch (or construct it and call .to(device))");
  }
  const auto local = c10::impl::tls_local_dispatch_key_set();
  saved_included_ = local.included_.raw_repr();
  saved_excluded_ = local.excluded_.raw_repr();
  if (!enabled) return;  // the destructor restores what is there now
  auto next = local;
  if (device.type() == c10::kMeta) {
    next.included_ = next.included_ | kMetaKeys;
    next.excluded_ = next.excluded_ | kBackendSelect;
  } else {
    // By raw bits: DispatchKeySet's operator- keeps backend bits, and a Meta backend bit left in
    // the included set would still send every operation on CPU tensors to Meta kernels.
    next.included_ = c10::DispatchKeySet(c10::DispatchKeySet::RAW,
                                         next.included_.raw_repr() & ~kMetaKeys.raw_repr());
    next.excluded_ = next.excluded_ - kBackendSelect;
  }
  c10::impl::_force_tls_local_dispatch_key_set(next);
}

init_on_device::~init_on_device() {
  c10::impl::PODLocalDispatchKeySet saved;
  saved.set_included(c10::DispatchKeySet(c10::DispatchKeySet::RAW, saved_included_));
  saved.set_excluded(c10::DispatchKeySet(c10::DispatchKeySet::RAW, saved_excluded_));
  c10::impl::_force_tls_local_dispatch_key_set(c10::impl::LocalDispatchKeySet(saved));
}

bool has_meta_tensors(const torch::nn::Module& module) {
  for (const auto& parameter : module.parameters()) {
    if (parameter.defined() && parameter.is_meta()) return true;
  }
  for (const auto& buffer : module.buffers()) {
    if (buffer.defined() && buffer.is_meta()) return true;
  }
  return false;
}

}  // namespace acc

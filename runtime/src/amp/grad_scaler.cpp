#include <acc/errors.h>
#include <acc/grad_scaler.h>

#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <ATen/ops/_amp_update_scale.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <ATen/TensorOperators.h>
#include <c10/core/GradMode.h>

namespace acc {

GradScaler::GradScaler(const GradScalerKwargs& options, c10::Device device) : options_(options) {
  if (options_.init_scale() <= 0 || options_.growth_factor() <= 1.0 ||
      options_.backoff_factor() <= 0 || options_.backoff_factor() >= 1.0 ||
      options_.growth_interval() < 1) {
    throw ConfigError(
        "acc: GradScalerKwargs need init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1 and "
        "growth_interval >= 1 (torch's defaults: 65536, 2, 0.5, 2000)");
  }
  scale_ = at::full({1}, options_.init_scale(), at::TensorOptions().dtype(at::kFloat).device(device));
  growth_tracker_ = at::zeros({1}, at::TensorOptions().dtype(at::kInt).device(device));
}

at::Tensor GradScaler::scale(const at::Tensor& loss) const {
  if (!is_enabled()) return loss;
  return loss * scale_.to(loss.device());  // a [1] float32 tensor: an fp16 loss is promoted
}

void GradScaler::unscale_(torch::optim::Optimizer& optimizer) {
  if (!is_enabled() || found_inf_.count(&optimizer)) return;
  c10::NoGradGuard no_grad;
  found_inf_[&optimizer] = check_and_unscale(optimizer, scale_.to(at::kDouble).reciprocal().to(at::kFloat));
}

FusedStepScaling GradScaler::fused_step_inputs(torch::optim::Optimizer& optimizer) {
  if (!is_enabled()) return {};
  if (auto unscaled = found_inf_.find(&optimizer); unscaled != found_inf_.end()) return {std::nullopt, unscaled->second};
  c10::NoGradGuard no_grad;
  // Multiplying by 1 leaves the gradients as they are; the kernel divides them by the scale.
  auto found = check_and_unscale(optimizer, at::ones({1}, scale_.options()));
  found_inf_[&optimizer] = found;
  return {scale_, found};
}

at::Tensor GradScaler::check_and_unscale(torch::optim::Optimizer& optimizer, const at::Tensor& inv_scale) {
  auto found = at::zeros({1}, scale_.options());
  // The kernel wants gradients of one device and dtype per call.
  std::map<std::pair<std::string, int>, std::vector<at::Tensor>> groups;
  for (auto& group : optimizer.param_groups()) {
    for (auto& p : group.params()) {
      const auto& grad = p.grad();
      if (!grad.defined()) continue;
      if (grad.is_sparse()) {
        throw Error("acc: the grad scaler does not handle sparse gradients; construct the "
                    "embedding with sparse(false)");
      }
      groups[{grad.device().str(), static_cast<int>(grad.scalar_type())}].push_back(grad);
    }
  }
  for (auto& [key, grads] : groups) {
    auto device_found = at::zeros({1}, scale_.options().device(grads.front().device()));
    at::_amp_foreach_non_finite_check_and_unscale_(grads, device_found,
                                                   inv_scale.to(grads.front().device()));
    found.add_(device_found.to(found.device()));
  }
  found.clamp_max_(1);  // a flag, as the fused kernels read it: they skip only where it is exactly 1
  if (reduce_found_inf_) reduce_found_inf_(found);
  return found;
}

bool GradScaler::found_inf(const torch::optim::Optimizer& optimizer) const {
  auto it = found_inf_.find(&optimizer);
  return it != found_inf_.end() && it->second.item<float>() > 0;
}

void GradScaler::update() {
  if (!is_enabled()) return;
  auto found = at::zeros({1}, scale_.options());
  for (auto& [optimizer, f] : found_inf_) found.add_(f);
  at::_amp_update_scale_(scale_, growth_tracker_, found, options_.growth_factor(),
                         options_.backoff_factor(), options_.growth_interval());
  found_inf_.clear();
}

double GradScaler::get_scale() const { return is_enabled() ? scale_.item<double>() : 1.0; }
int64_t GradScaler::growth_tracker() const { return growth_tracker_.item<int64_t>(); }

void GradScaler::load(double scale, int64_t growth_tracker) {
  scale_.fill_(scale);
  growth_tracker_.fill_(growth_tracker);
}

}  // namespace acc

#include "parallel/meta_tensors.h"

#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/variable.h>

#include <acc/errors.h>

namespace acc::detail {

std::string first_meta_tensor(const torch::nn::Module& model) {
  for (const auto& item : model.named_parameters()) {
    if (item.value().defined() && item.value().is_meta()) return item.key();
  }
  for (const auto& item : model.named_buffers()) {
    if (item.value().defined() && item.value().is_meta()) return item.key();
  }
  return "";
}

void materialize(const at::Tensor& tensor, const at::Tensor& value) {
  if (!tensor.is_meta()) {
    tensor.set_data(value);
    return;
  }
  if (torch::autograd::impl::try_get_grad_accumulator(tensor)) {
    throw Error("acc: a parameter built empty (a meta tensor) already took part in a backward pass; "
                "prepare() the model before running it");
  }
  tensor.unsafeGetTensorImpl()->shallow_copy_from(value.getIntrusivePtr());
}

void materialize_meta_tensors(torch::nn::Module& model, c10::Device device, bool trainable) {
  c10::NoGradGuard no_grad;
  auto give_memory = [&](const at::Tensor& tensor) {
    if (tensor.defined() && tensor.is_meta()) {
      materialize(tensor, at::empty(tensor.sizes(), tensor.options().device(device).requires_grad(false)));
    }
  };
  for (const auto& parameter : model.parameters()) {
    if (trainable || !parameter.requires_grad()) give_memory(parameter);
  }
  for (const auto& buffer : model.buffers()) give_memory(buffer);
}

void move_tensors_with_data(torch::nn::Module& model, c10::Device device) {
  c10::NoGradGuard no_grad;
  auto move = [&](const at::Tensor& tensor) {
    if (tensor.defined() && !tensor.is_meta() && tensor.device() != device) {
      tensor.set_data(tensor.to(device));
    }
  };
  for (const auto& parameter : model.parameters()) move(parameter);
  for (const auto& buffer : model.buffers()) move(buffer);
}

}  // namespace acc::detail

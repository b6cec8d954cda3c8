#pragma once
// A dataset whose batches are the tensor of their sample indices, so tests can see exactly
// which samples each rank loaded.
#include <torch/data/datasets/base.h>
#include <torch/types.h>

#include <vector>

namespace acc::testing {

class Indices : public torch::data::datasets::BatchDataset<Indices, torch::Tensor> {
 public:
  explicit Indices(size_t size) : size_(size) {}
  torch::Tensor get_batch(c10::ArrayRef<size_t> indices) override {
    std::vector<int64_t> values(indices.begin(), indices.end());
    return torch::tensor(values, torch::kLong);
  }
  std::optional<size_t> size() const override { return size_; }

 private:
  size_t size_;
};

inline std::vector<size_t> as_indices(const torch::Tensor& batch) {
  auto flat = batch.to(torch::kCPU).contiguous();
  std::vector<size_t> out;
  for (int64_t i = 0; i < flat.numel(); ++i) out.push_back(flat[i].item<int64_t>());
  return out;
}

}  // namespace acc::testing

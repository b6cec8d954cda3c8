#pragma once
// The inputs the Python parity scripts write for acc's side: raw float32 files, and a dataset of
// (x row, y row) examples over them.
#include <torch/data/datasets/base.h>
#include <torch/data/example.h>
#include <torch/types.h>

#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace acc::testing {

/// `count` float32 values from `path`, as a 1-d tensor.
inline torch::Tensor read_floats(const std::string& path, int64_t count) {
  std::ifstream in(path, std::ios::binary);
  std::vector<float> values(count);
  in.read(reinterpret_cast<char*>(values.data()), count * sizeof(float));
  if (!in) throw std::runtime_error("cannot read " + std::to_string(count) + " floats from " + path);
  return torch::from_blob(values.data(), {count}, torch::kFloat).clone();
}

/// Copies the script's flat initial weights (parameters in registration order) into `parameters`.
inline void load_flat_parameters(const std::vector<torch::Tensor>& parameters, const torch::Tensor& flat) {
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (const auto& p : parameters) {
    p.copy_(flat.narrow(0, offset, p.numel()).view(p.sizes()));
    offset += p.numel();
  }
}

/// Per-sample examples: data = x[i], target = y[i].
class Regression : public torch::data::datasets::Dataset<Regression> {
 public:
  Regression(torch::Tensor x, torch::Tensor y) : x_(std::move(x)), y_(std::move(y)) {}
  torch::data::Example<> get(size_t i) override { return {x_[i], y_[i]}; }
  std::optional<size_t> size() const override { return x_.size(0); }

 private:
  torch::Tensor x_, y_;
};

}  // namespace acc::testing

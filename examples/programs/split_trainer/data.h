// The dataset both training stages read: pairs whose target is the sum of the inputs, shifted by
// `offset` so that fine-tuning sees other data than the first stage.
#pragma once
#include <torch/torch.h>

struct Pairs : torch::data::datasets::Dataset<Pairs> {
  explicit Pairs(float offset = 0) : offset(offset) {}
  torch::data::Example<> get(size_t i) override {
    auto x = torch::full({2}, static_cast<float>(i % 7) + offset);
    return {x, x.sum().unsqueeze(0)};
  }
  torch::optional<size_t> size() const override { return 128; }
  float offset;
};

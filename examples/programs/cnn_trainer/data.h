// The CNN trainer's data: 16x16 one-channel images of four "shapes" (fixed patterns drawn once from
// the seeded generator) under noise. Learnable in a few epochs on a CPU, no download.
#pragma once
#include <torch/torch.h>

struct Shapes : torch::data::datasets::Dataset<Shapes> {
  Shapes(const torch::Tensor &patterns, int64_t n)
      : labels(torch::randint(4, {n})),
        images(patterns.index_select(0, labels) + 1.5 * torch::randn({n, 1, 16, 16})) {}
  torch::data::Example<> get(size_t i) override { return {images[i], labels[i]}; }
  torch::optional<size_t> size() const override { return images.size(0); }
  torch::Tensor labels, images;
};

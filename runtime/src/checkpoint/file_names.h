#pragma once
// Accelerate's names for the index-th object of a kind in a checkpoint: "model.safetensors",
// "model_1.safetensors", ...; acc's own layout numbers its files the same way.
#include <cstddef>
#include <string>

namespace acc::detail {

inline std::string numbered(const std::string& stem, std::size_t index, const std::string& extension) {
  return index == 0 ? stem + extension : stem + "_" + std::to_string(index) + extension;
}

}  // namespace acc::detail

#pragma once
// Which gradients share a communication bucket, decided from sizes alone (no tensors, so the rule is
// unit-testable and shared by every reducer).
#include <cstddef>
#include <string>
#include <vector>

namespace acc::detail {

struct BucketInput {
  std::string key;    // gradients with different keys (dtype, device) never share a bucket
  size_t bytes = 0;
  bool alone = false;  // a bucket of its own, at its place in the order (reduced where it lies)
};

/// Buckets of parameter indices in launch order, as torch DDP assigns them. Parameters are taken in
/// reverse registration order, the order their gradients become ready in backward. A bucket closes
/// once it holds at least `cap_bytes`; the first bucket of each key closes at `first_cap_bytes`, so
/// that communication starts early in backward. A parameter marked `alone` gets a bucket of its own
/// when it is reached, and the open bucket of its key stays open.
std::vector<std::vector<size_t>> plan_buckets(const std::vector<BucketInput>& params, size_t cap_bytes,
                                              size_t first_cap_bytes);

}  // namespace acc::detail

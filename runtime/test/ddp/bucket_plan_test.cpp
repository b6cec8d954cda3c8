// The DDP bucket rule: reverse registration order, one key per bucket, a small first bucket per key.
#include <gtest/gtest.h>

#include "ddp/bucket_plan.h"

namespace {
using acc::detail::BucketInput;
using acc::detail::plan_buckets;
using Layout = std::vector<std::vector<size_t>>;

constexpr size_t kMiB = 1024 * 1024;

std::vector<BucketInput> uniform(size_t count, size_t bytes, const std::string& key = "float@cpu") {
  return std::vector<BucketInput>(count, BucketInput{key, bytes});
}

TEST(BucketPlan, SmallFirstBucketThenTheRest) {
  // 16 x 260 KiB: the last four parameters fill the 1 MiB first bucket, the other twelve fit one.
  Layout expected{{15, 14, 13, 12}, {11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}};
  EXPECT_EQ(plan_buckets(uniform(16, 260 * 1024), 25 * kMiB, kMiB), expected);
}

TEST(BucketPlan, FirstBucketCapEqualToTheCapGivesASmallModelOneBucket) {
  EXPECT_EQ(plan_buckets(uniform(16, 260 * 1024), 25 * kMiB, 25 * kMiB).size(), 1u);
}

TEST(BucketPlan, FirstBucketIsSmallThenTheCapApplies) {
  // 6 x 1 MiB under a 2 MiB cap: first bucket closes at 1 MiB, the others at 2 MiB.
  EXPECT_EQ(plan_buckets(uniform(6, kMiB), 2 * kMiB, kMiB), (Layout{{5}, {4, 3}, {2, 1}, {0}}));
}

TEST(BucketPlan, KeysNeverShareABucketAndEachHasItsOwnFirstBucket) {
  std::vector<BucketInput> params = {{"float@cpu", kMiB}, {"half@cpu", kMiB}, {"float@cpu", kMiB},
                                     {"half@cpu", kMiB},  {"float@cpu", kMiB}};
  // Each key's first bucket closes at 1 MiB, later ones at 2 MiB.
  EXPECT_EQ(plan_buckets(params, 2 * kMiB, kMiB), (Layout{{4}, {3}, {2, 0}, {1}}));
}

TEST(BucketPlan, TinyCapGivesEveryParameterItsOwnBucket) {
  EXPECT_EQ(plan_buckets(uniform(3, 400), 100, 100), (Layout{{2}, {1}, {0}}));
}

TEST(BucketPlan, AParameterMarkedAloneHasABucketOfItsOwnAndTheOpenBucketStaysOpen) {
  // weight, bias, weight, bias: the two weights alone (reduced where they lie), the biases share one.
  std::vector<BucketInput> params = {{"float@cpu", 16 * kMiB, true}, {"float@cpu", 8192},
                                     {"float@cpu", 16 * kMiB, true}, {"float@cpu", 8192}};
  EXPECT_EQ(plan_buckets(params, 25 * kMiB, kMiB), (Layout{{2}, {0}, {3, 1}}));
}

TEST(BucketPlan, NoParametersNoBuckets) { EXPECT_TRUE(plan_buckets({}, kMiB, kMiB).empty()); }
}  // namespace

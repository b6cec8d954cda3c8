#include <gtest/gtest.h>

#include <cmath>

#include <acc/errors.h>
#include <acc/options.h>

#include "env_fixture.h"

namespace {
using acc::AcceleratorOptions;
using acc::MixedPrecision;
using acc::resolve_options;
using acc::testing::fake_env;

TEST(Options, DefaultsAreAccelerates) {
  auto resolved = resolve_options(AcceleratorOptions().environment(fake_env({})));
  EXPECT_FALSE(resolved.cpu);
  EXPECT_EQ(resolved.mixed_precision, MixedPrecision::NO);
  EXPECT_EQ(resolved.gradient_accumulation_steps, 1);
  EXPECT_FALSE(resolved.use_fsdp);
  AcceleratorOptions options;
  EXPECT_TRUE(options.device_placement());
  EXPECT_FALSE(options.split_batches());
  EXPECT_TRUE(options.even_batches());
  EXPECT_TRUE(options.step_scheduler_with_optimizer());
  EXPECT_TRUE(options.ddp().broadcast_buffers());
  EXPECT_EQ(options.ddp().bucket_cap_mb(), 25.0);
  EXPECT_EQ(options.ddp().first_bucket_cap_mb(), 1.0);
  EXPECT_FALSE(options.ddp().find_unused_parameters());
}

TEST(Options, EnvironmentOverDefaults) {
  auto resolved = resolve_options(AcceleratorOptions().environment(
      fake_env({{"ACCELERATE_USE_CPU", "yes"}, {"ACCELERATE_MIXED_PRECISION", "BF16"},
                {"ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "4"}, {"ACCELERATE_USE_FSDP", "true"},
                {"ACCELERATE_TORCH_DEVICE", "cuda:1"}})));
  EXPECT_TRUE(resolved.cpu);
  EXPECT_EQ(resolved.mixed_precision, MixedPrecision::BF16);
  EXPECT_EQ(resolved.gradient_accumulation_steps, 4);
  EXPECT_TRUE(resolved.use_fsdp);
  EXPECT_EQ(resolved.torch_device, "cuda:1");
}

TEST(Options, ArgumentsOverEnvironment) {
  auto resolved = resolve_options(AcceleratorOptions()
                                      .cpu(false)
                                      .mixed_precision(MixedPrecision::FP16)
                                      .gradient_accumulation_steps(2)
                                      .environment(fake_env(
                                          {{"ACCELERATE_USE_CPU", "1"},
                                           {"ACCELERATE_MIXED_PRECISION", "bf16"},
                                           {"ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "8"}})));
  EXPECT_FALSE(resolved.cpu);
  EXPECT_EQ(resolved.mixed_precision, MixedPrecision::FP16);
  EXPECT_EQ(resolved.gradient_accumulation_steps, 2);
}

TEST(Options, BooleansAsAccelerateSpellsThem) {
  for (const char* yes : {"y", "YES", "t", "true", "On", "1"}) EXPECT_TRUE(acc::parse_env_bool("X", yes));
  for (const char* no : {"n", "no", "F", "false", "off", "0"}) EXPECT_FALSE(acc::parse_env_bool("X", no));
  try {
    acc::parse_env_bool("ACCELERATE_USE_CPU", "maybe");
    FAIL();
  } catch (const acc::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("ACCELERATE_USE_CPU='maybe'"), std::string::npos);
  }
}

TEST(Options, BadValuesNameTheVariableAndTheFix) {
  auto error_of = [](std::map<std::string, std::string> vars) -> std::string {
    try {
      resolve_options(AcceleratorOptions().environment(fake_env(vars)));
    } catch (const acc::ConfigError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of({{"ACCELERATE_MIXED_PRECISION", "fp8"}}).find("use 'bf16' or 'fp16'"),
            std::string::npos);
  EXPECT_NE(error_of({{"ACCELERATE_MIXED_PRECISION", "half"}}).find("no, fp16, bf16"),
            std::string::npos);
  EXPECT_NE(error_of({{"ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "0"}}).find(">= 1"),
            std::string::npos);
  EXPECT_NE(error_of({{"ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "2x"}}).find("'2x'"),
            std::string::npos);
  EXPECT_THROW(resolve_options(AcceleratorOptions().gradient_accumulation_steps(0)),
               acc::ConfigError);
}

TEST(Options, BucketSizesMustBePositive) {
  for (double bad : {0.0, -1.0, std::nan("")}) {
    try {
      resolve_options(AcceleratorOptions().ddp(acc::DistributedDataParallelKwargs().first_bucket_cap_mb(bad)));
      ADD_FAILURE() << "first_bucket_cap_mb(" << bad << ") was accepted";
    } catch (const acc::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("first_bucket_cap_mb("), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(resolve_options(AcceleratorOptions().ddp(acc::DistributedDataParallelKwargs().bucket_cap_mb(0))),
               acc::ConfigError);
}

TEST(Options, BackendIsNcclOrGloo) {
  EXPECT_EQ(resolve_options(AcceleratorOptions().environment(fake_env({}))).backend, std::nullopt);
  EXPECT_EQ(resolve_options(AcceleratorOptions().backend("gloo")).backend, "gloo");
  EXPECT_EQ(resolve_options(AcceleratorOptions().backend("nccl")).backend, "nccl");
  for (const char* bad : {"mpi", "NCCL", ""}) {
    try {
      resolve_options(AcceleratorOptions().backend(bad));
      ADD_FAILURE() << "backend(\"" << bad << "\") was accepted";
    } catch (const acc::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("backend(\"") + bad + "\") is not a backend acc runs on; "
                                           "use \"nccl\""),
                std::string::npos) << e.what();
    }
  }
}

TEST(Options, EnumNames) {
  EXPECT_EQ(acc::to_string(MixedPrecision::BF16), "bf16");
  EXPECT_EQ(acc::to_string(acc::DistributedType::MULTI_CPU), "MULTI_CPU");
  EXPECT_EQ(acc::parse_mixed_precision("No", "test"), MixedPrecision::NO);
}
}  // namespace

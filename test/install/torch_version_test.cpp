// The comparison behind libacc's load-time libtorch check, and the version this process's libtorch
// reports (the one this build found: CMake's Torch_VERSION, ACC_FOUND_TORCH_VERSION).
#include "core/torch_version_check.h"

#include <gtest/gtest.h>

using acc::detail::torch_version_mismatch;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(TorchVersion, TheLoadedLibtorchReportsTheVersionThisBuildFound) {
  std::string library;
  EXPECT_EQ(acc::detail::loaded_torch_version(&library), ACC_FOUND_TORCH_VERSION);
  EXPECT_TRUE(contains(library, "libtorch_cpu.so")) << library;
  EXPECT_EQ(acc::detail::compiled_torch_version(), ACC_FOUND_TORCH_VERSION);
  EXPECT_EQ(torch_version_mismatch(acc::detail::compiled_torch_version(),
                                   acc::detail::loaded_torch_version(), library), "");
}

TEST(TorchVersion, AnotherMinorVersionIsRefusedNamingBothAndTheFix) {
  const std::string error = torch_version_mismatch("2.11.0", "2.10.1+cpu", "/opt/libtorch/lib/libtorch_cpu.so");
  EXPECT_TRUE(contains(error, "libacc was built against libtorch 2.11.0, but this process loaded libtorch "
                              "2.10.1+cpu (/opt/libtorch/lib/libtorch_cpu.so)")) << error;
  EXPECT_TRUE(contains(error, "Fix: run with libtorch 2.11.x")) << error;
  EXPECT_TRUE(contains(error, "rebuild and reinstall acc against libtorch 2.10.1+cpu")) << error;
  EXPECT_NE(torch_version_mismatch("2.11.0", "2.12.0a0+git70d99e9", ""), "");
  EXPECT_NE(torch_version_mismatch("2.11.0", "3.11.0", ""), "");
  EXPECT_NE(torch_version_mismatch("2.1.0", "2.11.0", ""), "");  // numbers, not prefixes
}

TEST(TorchVersion, AnotherPatchReleaseOrBuildOfTheSameMinorIsAccepted) {
  EXPECT_EQ(torch_version_mismatch("2.11.0", "2.11.1", ""), "");
  EXPECT_EQ(torch_version_mismatch("2.11.0", "2.11.0+cu130", ""), "");
  EXPECT_EQ(torch_version_mismatch("2.11.0+cpu", "2.11.0a0+gitabc", ""), "");
}

TEST(TorchVersion, AVersionThatCannotBeReadIsNotRefused) {
  EXPECT_EQ(torch_version_mismatch("2.11.0", "", ""), "");
  EXPECT_EQ(torch_version_mismatch("2.11.0", "unknown", ""), "");
  EXPECT_EQ(torch_version_mismatch("", "2.10.0", ""), "");
}

}  // namespace

// libacc links libtorch_cpu only and loads its CUDA part (libacc_cuda.so: NCCL, libtorch_cuda and
// the CUDA libraries) where a GPU may be used. Runs cuda_support_probe under each setting.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstdio>
#include <map>
#include <sstream>
#include <string>

namespace {

std::map<std::string, std::string> probe(const std::string& environment) {
  const std::string command = "env -u ACC_LOAD_CUDA -u ACCELERATE_USE_CPU " + environment + " " +
                              ACC_CUDA_SUPPORT_PROBE + " 2>&1";
  std::map<std::string, std::string> facts;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return facts;
  std::string output;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
  facts["exit"] = std::to_string(::pclose(pipe));
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) facts[line.substr(0, eq)] = line.substr(eq + 1);
  }
  facts["output"] = output;
  return facts;
}

// libtorch_cpu itself needs these two (DT_NEEDED: the CUDA runtime's 0.7 MB and Kineto's profiler
// library), so they are mapped in every process that uses libtorch; nothing else of CUDA may be.
bool only_what_libtorch_cpu_needs(const std::string& mapped) {
  std::istringstream names(mapped);
  for (std::string name; std::getline(names, name, ',');) {
    if (name.rfind("libcudart.so", 0) != 0 && name.rfind("libcupti.so", 0) != 0) return false;
  }
  return true;
}

bool gpu_driver_present() {
  void* driver = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (driver != nullptr) ::dlclose(driver);
  return driver != nullptr;
}

TEST(CudaSupport, AProcessThatMayNotUseAGpuMapsNoCudaLibrary) {
  for (const char* setting : {"ACC_LOAD_CUDA=0", "ACCELERATE_USE_CPU=true"}) {
    auto facts = probe(setting);
    SCOPED_TRACE(std::string(setting) + "\n" + facts["output"]);
    ASSERT_EQ(facts["exit"], "0");
    EXPECT_EQ(facts["loaded"], "0");
    EXPECT_TRUE(only_what_libtorch_cpu_needs(facts["mapped"])) << facts["mapped"];
    EXPECT_EQ(facts["cuda_available"], "0");
    // Asked for NCCL anyway, libacc says what was not loaded, why, and what to do.
    EXPECT_NE(facts["nccl"].find("libacc_cuda.so"), std::string::npos);
    EXPECT_NE(facts["nccl"].find(facts["why_not"]), std::string::npos);
    EXPECT_NE(facts["nccl"].find("AcceleratorOptions().cpu(true)"), std::string::npos);
  }
  EXPECT_EQ(probe("ACC_LOAD_CUDA=0")["why_not"], "ACC_LOAD_CUDA=0");
  EXPECT_NE(probe("ACCELERATE_USE_CPU=1")["why_not"].find("ACCELERATE_USE_CPU"), std::string::npos);
}

TEST(CudaSupport, WithoutAGpuDriverNothingOfCudaIsLoaded) {
  if (gpu_driver_present()) GTEST_SKIP() << "this machine has a GPU driver";
  auto facts = probe("");
  SCOPED_TRACE(facts["output"]);
  EXPECT_EQ(facts["loaded"], "0");
  EXPECT_NE(facts["why_not"].find("no NVIDIA driver"), std::string::npos);
  EXPECT_TRUE(only_what_libtorch_cpu_needs(facts["mapped"])) << facts["mapped"];
}

TEST(CudaSupport, LoadedItBringsLibtorchCudaAndNccl) {
#ifndef ACC_HAS_CUDA_LIBRARY
  GTEST_SKIP() << "this libacc was built against a libtorch without CUDA";
#endif
  // ACC_LOAD_CUDA=1 loads it even without a driver: the CUDA build's code paths, minus the GPU.
  auto facts = probe("ACC_LOAD_CUDA=1");
  SCOPED_TRACE(facts["output"]);
  ASSERT_EQ(facts["exit"], "0");
  EXPECT_EQ(facts["loaded"], "1");
  EXPECT_EQ(facts["why_not"], "");
  for (const char* library : {"libtorch_cuda.so", "libc10_cuda.so", "libnccl.so", "libcublas.so"}) {
    EXPECT_NE(facts["mapped"].find(library), std::string::npos) << library;
  }
  // The NCCL backend is registered: the error now comes from torch's ProcessGroupNCCL (no GPU
  // here) or it is constructed (a GPU), never from libacc's missing-library message.
  EXPECT_EQ(facts["nccl"].find("libacc_cuda.so"), std::string::npos) << facts["nccl"];
  if (!gpu_driver_present()) EXPECT_NE(facts["nccl"].find("GPU"), std::string::npos) << facts["nccl"];
}

}  // namespace

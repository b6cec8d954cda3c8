// A stand-in for another libtorch, preloaded (LD_PRELOAD) ahead of the real one by
// check_torch_load.sh: it defines caffe2::GetBuildOptions, the function through which libtorch_cpu
// reports its version, answering ACC_OTHER_TORCH_VERSION. The dynamic loader binds libacc's call to
// the first definition in load order, as it would bind it to another libtorch_cpu.so found first
// (LD_LIBRARY_PATH, a program linked against another libtorch).
#include <map>
#include <string>

namespace caffe2 {
const std::map<std::string, std::string>& GetBuildOptions() {
  static const std::map<std::string, std::string> options{{"TORCH_VERSION", ACC_OTHER_TORCH_VERSION}};
  return options;
}
}  // namespace caffe2

#pragma once
// Helpers of the tracking tests: scratch directories and running helper programs.
#include <ftw.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace acc::testing {

/// A fresh directory under the system's temporary directory, removed with the object.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "acc-tracking-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  // Not std::filesystem::remove_all: the torch wheel's libtorch.so exports its own copy of it,
  // which crashes (null call) when a test linked with libacc uses the error_code overload.
  ~ScratchDir() { nftw(path_.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS); }
  const std::string& path() const { return path_; }

 private:
  static int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
    return ::remove(path);
  }
  std::string path_;
};

/// Runs a shell command; returns its stdout (stderr too when the command redirects it).
inline std::string run_command(const std::string& command, int* status = nullptr) {
  std::string output;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
    const int rc = pclose(pipe);
    if (status != nullptr) *status = rc;
  }
  return output;
}

/// read_back.py (TensorBoard's reader, strict JSON, Python's csv) on `file`.
inline std::string read_back(const std::string& mode, const std::string& file) {
  return run_command(std::string(ACC_PYTHON) + " " + ACC_TRACKING_READER + " " + mode + " '" +
                     file + "' 2>&1");
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  return names;
}

}  // namespace acc::testing

#pragma once
// Helpers of the checkpoint suite: scratch directories, running the venv's Python, byte dumps.
#include <ATen/core/Tensor.h>

#include <string>

namespace acc::testing {

/// A fresh empty directory under $TMPDIR, removed with its contents at destruction.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct PythonResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

/// Runs `script` with the venv's Python (ACC_PYTHON) and `args`.
PythonResult run_python(const std::string& script, const std::string& args = "");

/// Lower-case hex of the tensor's bytes in row-major order (how Python sees them too).
std::string bytes_hex(const at::Tensor& tensor);

}  // namespace acc::testing

#pragma once
// Helpers of the checkpoint suite: running the venv's Python, byte dumps (and ScratchDir).
#include <ATen/core/Tensor.h>

#include <string>

#include "scratch_dir.h"

namespace acc::testing {

struct PythonResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

/// Runs `script` with the venv's Python (ACC_PYTHON) and `args`.
PythonResult run_python(const std::string& script, const std::string& args = "");

/// Lower-case hex of the tensor's bytes in row-major order (how Python sees them too).
std::string bytes_hex(const at::Tensor& tensor);

}  // namespace acc::testing

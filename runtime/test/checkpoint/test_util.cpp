#include "test_util.h"

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace acc::testing {

PythonResult run_python(const std::string& script, const std::string& args) {
  ScratchDir dir;
  const std::string file = dir / "script.py";
  std::ofstream(file) << script;
  const std::string command = std::string(ACC_PYTHON) + " " + file + " " + args + " 2>&1";
  PythonResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed");
  char buffer[4096];
  size_t read = 0;
  while ((read = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, read);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string bytes_hex(const at::Tensor& tensor) {
  const auto data = tensor.contiguous();
  const auto* bytes = static_cast<const unsigned char*>(data.data_ptr());
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < data.nbytes(); ++i) {
    out += digits[bytes[i] >> 4];
    out += digits[bytes[i] & 15];
  }
  return out;
}

}  // namespace acc::testing

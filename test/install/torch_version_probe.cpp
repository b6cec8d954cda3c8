// A program linked against libacc that says which libtorch it runs with: its main is reached only
// when libacc's load-time check (runtime/src/core/torch_version_check.cpp) let the process go on.
#include "core/torch_version_check.h"

#include <iostream>

int main() {
  std::string library;
  const std::string loaded = acc::detail::loaded_torch_version(&library);
  std::cout << "libacc runs with libtorch " << loaded << " (" << library << "), built against "
            << acc::detail::compiled_torch_version() << std::endl;
  return 0;
}

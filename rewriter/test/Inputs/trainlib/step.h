// A library header (outside the project) with a macro that writes a function's body into the file
// that expands it. Marked a system header, as a library installed under -isystem is.
#pragma once
#pragma GCC system_header
#include <torch/torch.h>
#define DEFINE_STEP(name) \
  inline void name(torch::Tensor loss) { loss.backward(); }

#pragma once
// What a rank of acc::launch needs from torch, kept in one file so that the rest of launch/ does not
// see torch's headers.
#include <exception>
#include <string>

namespace acc::detail {

/// at::set_num_threads in the child, before `fn` runs (torch's intra-op pool; see fork safety in
/// acc/function_launcher.h).
void set_intra_op_threads(int threads);

/// The text of an exception `fn` threw, for the caller's LaunchError: what() without libtorch's
/// C++ backtrace for c10::Error (the Python-side message a user reads), what() for others.
std::string exception_text(const std::exception_ptr& error);

}  // namespace acc::detail

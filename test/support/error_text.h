#pragma once
// What an expected error says: tests assert on the text users read.
#include <functional>
#include <string>

namespace acc::testing {

/// The what() of the `Error` that `action` throws, or `if_none` when it throws nothing. Other
/// exceptions pass through, so a wrong error type fails the test with its own message.
template <typename Error = std::exception>
std::string error_text(const std::function<void()>& action, const std::string& if_none = "(no error)") {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  return if_none;
}

}  // namespace acc::testing

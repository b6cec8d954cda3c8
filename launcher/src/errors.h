#pragma once
// The one exception type of the launcher wing. Every message names the problem and how to fix it; the
// entry points print it after "<tool>: error: " and exit with ExitCode::kUsage.
#include <stdexcept>
#include <string>

namespace acc::launcher {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Exit codes shared by the four tools (documented in docs/launcher.md). Codes of a failed rank are passed
// through by acc-launch, so these deliberately sit where shells put their own conventions.
namespace ExitCode {
inline constexpr int kOk = 0;
inline constexpr int kUsage = 2;          // bad flag, bad config, port in use: nothing was started
inline constexpr int kCannotExecute = 126; // the program exists but cannot be executed
inline constexpr int kNotFound = 127;      // the program was not found
inline constexpr int kSignalBase = 128;    // 128 + N: a rank (or acc-launch itself) was killed by signal N
}  // namespace ExitCode

}  // namespace acc::launcher

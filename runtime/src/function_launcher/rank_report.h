#pragma once
// What a rank of acc::launch tells the caller through its pipe before it exits: whether `fn`
// returned or threw, when (so that the caller can name the rank that failed first, not one that
// failed because of it), and the exception's text. Torch-free.
#include <chrono>
#include <optional>
#include <string>

namespace acc::detail {

struct RankReport {
  bool threw = false;
  /// When `fn` ended, on the steady clock, which every process of the machine shares (Linux's
  /// CLOCK_MONOTONIC).
  std::chrono::steady_clock::time_point ended;
  std::string error;  // the exception's text when it threw
};

/// At most this much of an exception's text travels (a pipe holds 64 KiB without a reader).
constexpr size_t kMaxReportedError = 16 * 1024;

std::string encode_report(const RankReport& report);
/// nullopt for bytes that are no whole report (the rank died while writing it, or never did).
std::optional<RankReport> decode_report(const std::string& bytes);

}  // namespace acc::detail

#include "function_launcher/rank_report.h"

#include <cstdint>

namespace acc::detail {

// "R <ns>\n" when fn returned, "T <ns>\n<text>" when it threw; "\n" ends the header, and the text
// (which may hold newlines) runs to the end.
std::string encode_report(const RankReport& report) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(report.ended.time_since_epoch()).count();
  std::string out = std::string(report.threw ? "T " : "R ") + std::to_string(ns) + "\n";
  if (report.threw) {
    if (report.error.size() > kMaxReportedError) {
      out +=
          report.error.substr(0, kMaxReportedError) + " [... cut at " + std::to_string(kMaxReportedError) + " bytes]";
    } else {
      out += report.error;
    }
  }
  return out;
}

std::optional<RankReport> decode_report(const std::string& bytes) {
  const size_t newline = bytes.find('\n');
  if (bytes.size() < 4 || (bytes[0] != 'R' && bytes[0] != 'T') || bytes[1] != ' ' || newline == std::string::npos) {
    return std::nullopt;
  }
  RankReport report;
  report.threw = bytes[0] == 'T';
  try {
    size_t used = 0;
    const int64_t ns = std::stoll(bytes.substr(2, newline - 2), &used);
    if (used != newline - 2) return std::nullopt;
    report.ended = std::chrono::steady_clock::time_point(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::nanoseconds(ns)));
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (report.threw) report.error = bytes.substr(newline + 1);
  return report;
}

}  // namespace acc::detail

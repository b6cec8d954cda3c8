#include <acc_common/slurm_nodelist.h>

namespace acc::common {

std::string first_slurm_host(const std::string& nodelist) {
  // The first entry ends at the first comma outside brackets. The depth never goes below zero, so an
  // unbalanced ']' cannot hide every later comma.
  size_t end = 0;
  for (int depth = 0; end < nodelist.size(); ++end) {
    const char c = nodelist[end];
    if (c == '[') ++depth;
    if (c == ']' && depth > 0) --depth;
    if (c == ',' && depth == 0) break;
  }
  const std::string entry = nodelist.substr(0, end);
  const size_t open = entry.find('[');
  if (open == std::string::npos) return entry;
  const size_t close = entry.find(']', open);
  const std::string range = entry.substr(open + 1, close == std::string::npos ? std::string::npos : close - open - 1);
  // "03-05,9" -> "03".
  const std::string first = range.substr(0, range.find_first_of(",-"));
  // Names may hold several ranges ("rack[1-2]-n[1-4]"): the suffix is expanded the same way.
  const std::string suffix = close == std::string::npos ? "" : first_slurm_host(entry.substr(close + 1));
  return entry.substr(0, open) + first + suffix;
}

}  // namespace acc::common

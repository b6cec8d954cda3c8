#include <acc_common/slurm_step.h>

#include <cctype>

namespace acc::common {
namespace {

// The value of a decimal number's last digits (enough of them for any modulus below 10^9), or -1 when
// `text` is not a decimal number.
long long tail_value(const std::string& text) {
  if (text.empty()) return -1;
  for (char c : text)
    if (!std::isdigit(static_cast<unsigned char>(c))) return -1;
  return std::stoll(text.size() > 9 ? text.substr(text.size() - 9) : text);
}

}  // namespace

std::string slurm_step_job_id(const std::string& job_id, const std::string& step_id) {
  if (job_id.empty()) return "";
  return job_id + "." + (step_id.empty() ? std::string("batch") : step_id);
}

int slurm_step_port(const std::string& job_id, const std::string& step_id) {
  const long long job = tail_value(job_id);
  if (job < 0) return 0;
  const long long step = tail_value(step_id);
  return static_cast<int>(10000 + 20 * (job % 1000) + 2 * (step < 0 ? 0 : step % 10));
}

}  // namespace acc::common

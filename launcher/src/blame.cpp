#include "blame.h"

#include <acc_common/blame_words.h>

#include <algorithm>
#include <cctype>

namespace acc::launcher {
namespace {

// The words of libacc's collective errors, from the header libacc builds them with.
using acc::common::blame_words::kFailedOn;
using acc::common::blame_words::kNotReached;
using acc::common::blame_words::kStoreExited;
using acc::common::blame_words::kStoreSilent;

std::optional<int> number_at(std::string_view text, size_t at) {
  size_t end = at;
  while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
  if (end == at || end - at > 9) return std::nullopt;
  return std::stoi(std::string(text.substr(at, end - at)));
}

// The rank number just before `at`, written "rank N".
std::optional<int> rank_before(std::string_view text, size_t at) {
  size_t start = at;
  while (start > 0 && std::isdigit(static_cast<unsigned char>(text[start - 1]))) --start;
  constexpr std::string_view kRank = "rank ";
  if (start == at || start < kRank.size() || text.substr(start - kRank.size(), kRank.size()) != kRank)
    return std::nullopt;
  return number_at(text, start);
}

// "rank 2 has" / "ranks 1, 3 have" just before `at`: the listed ranks.
std::vector<int> ranks_before(std::string_view text, size_t at) {
  const size_t verb = text.rfind(' ', at == 0 ? 0 : at - 1);
  if (verb == std::string_view::npos) return {};
  const std::string_view word = text.substr(verb + 1, at - verb - 1);
  if (word != "has" && word != "have") return {};
  const size_t list_end = verb;
  const size_t ranks = text.rfind("rank", list_end);
  if (ranks == std::string_view::npos) return {};
  size_t at_list = ranks + 4;
  if (at_list < list_end && text[at_list] == 's') ++at_list;
  std::vector<int> found;
  for (size_t i = at_list; i < list_end;) {
    if (text[i] == ' ' || text[i] == ',') {
      ++i;
      continue;
    }
    const auto number = number_at(text, i);
    if (!number) return {};  // not a plain list of numbers: some other text
    found.push_back(*number);
    while (i < list_end && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  }
  return found;
}

}  // namespace

std::optional<Accusation> accusation_in(std::string_view line) {
  const size_t failed = line.find(kFailedOn);
  if (failed == std::string_view::npos) return std::nullopt;
  const auto reporter = number_at(line, failed + kFailedOn.size());
  if (!reporter) return std::nullopt;
  Accusation accusation;
  accusation.reporter = *reporter;
  if (const size_t store = line.find(kStoreSilent, failed); store != std::string_view::npos) {
    if (const auto rank = rank_before(line, store)) {
      accusation.accused.push_back(*rank);
      const bool exited = line.find(kStoreExited, store) != std::string_view::npos;
      accusation.reason = exited ? "serves the job's store and has exited"
                                 : "serves the job's store and does not answer: it is stopped (SIGSTOP, a debugger) "
                                   "or its machine is unreachable";
    }
  } else if (const size_t missing = line.find(kNotReached, failed); missing != std::string_view::npos) {
    accusation.accused = ranks_before(line, missing);
    accusation.reason = "has not reached their collective (busy outside it, stopped, or exited)";
  }
  accusation.accused.erase(std::remove(accusation.accused.begin(), accusation.accused.end(), accusation.reporter),
                           accusation.accused.end());
  std::sort(accusation.accused.begin(), accusation.accused.end());
  if (accusation.accused.empty()) return std::nullopt;
  return accusation;
}

std::optional<Accusation> last_accusation(const std::deque<std::string>& lines) {
  for (auto line = lines.rbegin(); line != lines.rend(); ++line)
    if (auto accusation = accusation_in(*line)) return accusation;
  return std::nullopt;
}

}  // namespace acc::launcher

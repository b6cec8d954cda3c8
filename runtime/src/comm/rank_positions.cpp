#include "comm/rank_positions.h"

#include <acc_common/blame_words.h>

#include <exception>

namespace acc::detail {
namespace {

std::string key(int rank) { return "acc/position/" + std::to_string(rank); }

char state_letter(RankState state) {
  switch (state) {
    case RankState::kWaiting:
      return 'w';
    case RankState::kDone:
      return 'd';
    case RankState::kFailed:
      break;
  }
  return 'f';
}

// "<collective>\t<state>\t<what>"; nullopt for anything else (a key another program wrote).
std::optional<RankPosition> parse(const std::string& text) {
  const auto first = text.find('\t');
  if (first == std::string::npos || first + 3 > text.size() || text[first + 2] != '\t') return std::nullopt;
  RankPosition position;
  try {
    position.collective = std::stoull(text.substr(0, first));
  } catch (const std::exception&) {
    return std::nullopt;
  }
  switch (text[first + 1]) {
    case 'w':
      position.state = RankState::kWaiting;
      break;
    case 'd':
      position.state = RankState::kDone;
      break;
    case 'f':
      position.state = RankState::kFailed;
      break;
    default:
      return std::nullopt;
  }
  position.what = text.substr(first + 3);
  return position;
}

std::string ordinal(uint64_t n) {
  const uint64_t tens = n % 100;
  const char* suffix = "th";
  if (tens < 11 || tens > 13) {
    if (n % 10 == 1) suffix = "st";
    if (n % 10 == 2) suffix = "nd";
    if (n % 10 == 3) suffix = "rd";
  }
  return std::to_string(n) + suffix;
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string text = ranks.size() > 1 ? "ranks " : "rank ";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

}  // namespace

void post_position(c10d::Store& store, int rank, const RankPosition& position) noexcept {
  try {
    const std::string text = std::to_string(position.collective) + '\t' + state_letter(position.state) + '\t' +
                             position.what;
    store.set(key(rank), std::vector<uint8_t>(text.begin(), text.end()));
  } catch (const std::exception&) {
  }
}

std::vector<std::optional<RankPosition>> read_positions(c10d::Store& store, int size) {
  std::vector<std::optional<RankPosition>> positions(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    if (!store.check({key(r)})) continue;
    const auto bytes = store.get(key(r));
    positions[static_cast<size_t>(r)] = parse(std::string(bytes.begin(), bytes.end()));
  }
  return positions;
}

std::string describe_position(const RankPosition& position) {
  return "its " + ordinal(position.collective) + " collective (" + position.what + ")";
}

bool calls_differ(const std::vector<std::optional<RankPosition>>& positions, int rank, const RankPosition& mine) {
  for (int r = 0; r < static_cast<int>(positions.size()); ++r) {
    const auto& position = positions[static_cast<size_t>(r)];
    if (r != rank && position && position->state != RankState::kDone &&
        (position->collective != mine.collective || position->what != mine.what))
      return true;
  }
  return false;
}

std::string describe_peers(const std::vector<std::optional<RankPosition>>& positions, int rank,
                           const RankPosition& mine) {
  std::vector<int> missing, with_me;
  std::vector<std::string> elsewhere;
  for (int r = 0; r < static_cast<int>(positions.size()); ++r) {
    if (r == rank) continue;
    const auto& position = positions[static_cast<size_t>(r)];
    if (!position || position->state == RankState::kDone) {
      missing.push_back(r);
    } else if (position->collective == mine.collective && position->what == mine.what) {
      with_me.push_back(r);
    } else {
      elsewhere.push_back("rank " + std::to_string(r) +
                          (position->state == RankState::kFailed ? " failed in " : " waits in ") +
                          describe_position(*position) + " instead");
    }
  }
  std::vector<std::string> parts;
  if (!missing.empty())
    parts.push_back(ranks_text(missing) + (missing.size() > 1 ? " have" : " has") +
                    std::string(acc::common::blame_words::kNotReached) + " (busy outside it, stopped, or exited)");
  if (!elsewhere.empty()) {
    std::string text;
    for (const auto& part : elsewhere) text += (text.empty() ? "" : "; ") + part;
    parts.push_back(text +
                    ": the ranks do not call the same collectives in the same order (a collective inside "
                    "`if (accelerator.is_main_process())`, or a loop whose length differs between ranks, say)");
  }
  if (!with_me.empty())
    parts.push_back(ranks_text(with_me) + (with_me.size() > 1 ? " are" : " is") + " in it too");
  std::string text;
  for (const auto& part : parts) text += (text.empty() ? "" : "; ") + part;
  return text;
}

}  // namespace acc::detail

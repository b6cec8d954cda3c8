#include "did_you_mean.h"

#include <algorithm>

namespace acc::launcher {
namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::optional<std::string> closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_distance = 0;
  for (const auto& candidate : candidates) {
    size_t d = edit_distance(word, candidate);
    if (!best || d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  }
  // A third of the word's length catches transpositions and dropped letters without suggesting
  // unrelated keys for short words.
  size_t limit = std::max<size_t>(2, word.size() / 3);
  if (!best || best_distance > limit) return std::nullopt;
  return best;
}

}  // namespace acc::launcher

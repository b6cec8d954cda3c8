#pragma once
// "did you mean ...?" for misspelled config keys and choices.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace acc::launcher {

// The candidate closest to `word` by edit distance, if it is close enough to be a plausible typo.
std::optional<std::string> closest_match(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace acc::launcher

#pragma once
// Whom a failed rank blames. When a collective fails, libacc's error names the ranks it waited for
// ("rank 2 has not reached it (busy outside it, stopped, or exited)"; "rank 0, which serves the job's
// store, does not answer either: it is stopped ..."). For a rank on another machine those words are all
// this machine's acc-launch knows, so its failure report leads with the rank they name (issue 35, item 8).
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace acc::launcher {

struct Accusation {
  int reporter = -1;         // the rank whose error it is ("failed on rank R of N")
  std::vector<int> accused;  // the ranks it names as the ones it waited for, ascending
  std::string reason;        // why, in words that follow "it": "has not reached their collective (...)"
};

// What one line says, when it is libacc's error about a failed collective that names the ranks waited
// for; nullopt for any other line (the rank's own, a stall report, an error that blames nobody).
std::optional<Accusation> accusation_in(std::string_view line);

// The last such line among a rank's last lines.
std::optional<Accusation> last_accusation(const std::deque<std::string>& lines);

}  // namespace acc::launcher

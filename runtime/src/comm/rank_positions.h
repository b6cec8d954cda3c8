#pragma once
// Where each rank is in the job's sequence of collectives, for the messages about a collective that
// does not complete. A collective's own error knows at most its neighbour in a ring, and a rank that
// waits knows nothing about the others; the job's store does. A rank posts its position only when
// something is already slow or wrong (a wait past one second, a failure), so a healthy step costs
// the store nothing.
//
// A position is "the Nth collective this rank launched" plus what it is: ranks that run the same
// program reach the same N with the same name, so a rank that waits at another N, or at the same N in
// another collective, skipped one or called one more (a collective inside
// `if (accelerator.is_main_process())`, say).
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace acc::detail {

enum class RankState { kWaiting, kDone, kFailed };

struct RankPosition {
  uint64_t collective = 0;  // collectives launched by the rank so far, this one included
  RankState state = RankState::kWaiting;
  std::string what;         // "accelerator.reduce", "DDP gradient all-reduce (bucket 1 of 3)"
};

// Best effort: a store that is gone (rank 0 exited) is not this call's error to report.
void post_position(c10d::Store& store, int rank, const RankPosition& position) noexcept;

// Every rank's last posted position (nullopt: never posted). Throws when the store does not answer.
std::vector<std::optional<RankPosition>> read_positions(c10d::Store& store, int size);

// The peers of `rank`, relative to its position `mine` (in which it waits or failed):
// "rank 2 has not reached it (busy outside it, stopped, or exited); rank 3 waits in its 13th collective
// (accelerator.gather) instead: ...; rank 1 is in it too".
std::string describe_peers(const std::vector<std::optional<RankPosition>>& positions, int rank,
                           const RankPosition& mine);

// Whether a peer waits or failed in another collective than `mine` (the ranks' calls differ).
bool calls_differ(const std::vector<std::optional<RankPosition>>& positions, int rank, const RankPosition& mine);

// "its 12th collective (accelerator.reduce)".
std::string describe_position(const RankPosition& position);

}  // namespace acc::detail

#pragma once
// The words by which libacc's error about a failed collective names the ranks it waited for, and by
// which acc-launch finds them in a rank's output to name the culprit first (launcher/src/blame.h).
// One definition for both sides: a rewording in the runtime is a rewording the launcher reads.
//   "acc: reduce(sum) failed on rank 1 of 3 (timeout 4 s): ...; rank 0, which serves the job's
//    store, does not answer either: it has exited"
//   "... rank 2 has not reached it (busy outside it, stopped, or exited)"
#include <string_view>

namespace acc::common::blame_words {

/// After the collective's name: " failed on rank R of N".
inline constexpr std::string_view kFailedOn = " failed on rank ";
/// After "rank 0": the store's server does not answer ...
inline constexpr std::string_view kStoreSilent = ", which serves the job's store, does not answer";
/// ... because it has exited (else it is stopped or cut off).
inline constexpr std::string_view kStoreExited = ": it has exited";
/// After "rank N has" / "ranks N, M have".
inline constexpr std::string_view kNotReached = " not reached it";

}  // namespace acc::common::blame_words

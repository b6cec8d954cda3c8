#pragma once
// The job store's keys and what each store_protocol request does to them, with c10d's semantics
// (TCPStore's server and HashStore agree on them): ADD keeps decimal text, COMPARE_SET's four cases,
// a GET/WAIT/MULTI_GET waits while a key is missing. The table never blocks: a request that must
// wait comes back as `waits_for` a missing key, and rank 0's store loop (comm/gate/store_server.h) parks
// it until that key is written, then tries it again. Used by the loop's thread alone. Torch-free.
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm/gate/store_protocol.h"

namespace acc::detail {

class KeyValueTable {
 public:
  struct Outcome {
    /// The answer; empty when the request must wait for `waits_for`.
    std::optional<store_protocol::Response> response;
    /// A key the request waits for (the first missing one; the others are looked at again when it
    /// is written).
    std::string waits_for;
    /// Keys this request created or changed: their waiters may go on.
    std::vector<std::string> written;
  };

  /// Carries out `request` (its timeout is the caller's business), or says which key it waits for.
  Outcome execute(const store_protocol::Request& request);

  std::size_t size() const { return values_.size(); }

 private:
  std::unordered_map<std::string, std::string> values_;
};

}  // namespace acc::detail

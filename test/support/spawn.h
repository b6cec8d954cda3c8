#pragma once
// Starts N ranks of a program on loopback with torchrun's environment variables, under a hard
// deadline, and always reaps them: tests and benchmarks leave no process behind.
#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace acc::testing {

struct RankResult {
  int exit_code = -1;   // valid when !signaled
  int signal = 0;       // the signal that ended the rank, 0 if it exited
  std::string output;   // stdout and stderr, interleaved
};

struct SpawnResult {
  std::vector<RankResult> ranks;
  bool timed_out = false;
  std::chrono::milliseconds elapsed{0};
  bool all_succeeded() const;
  /// Every rank's output, headed by its rank and status (for assertion messages).
  std::string describe() const;
};

/// A TCP port that was free on 127.0.0.1 a moment ago.
int free_port();

/// Runs `program args...` as `num_ranks` ranks (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
/// MASTER_ADDR=127.0.0.1, a free MASTER_PORT, OMP_NUM_THREADS=1 unless `env` sets it). Ranks that
/// outlive `deadline` are killed and `timed_out` is set. `first_rank` > 0 starts ranks
/// first_rank.. only, as if the ones before had not started (give WORLD_SIZE in `env`).
SpawnResult spawn_ranks(const std::string& program, const std::vector<std::string>& args,
                        int num_ranks, std::chrono::milliseconds deadline,
                        const std::map<std::string, std::string>& env = {}, int first_rank = 0);

/// The directory of the running executable (tests find their helper programs there).
std::string executable_dir();

}  // namespace acc::testing

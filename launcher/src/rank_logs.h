#pragma once
// The log files of --log_dir: DIR/attempt_K/rank_R/stdout.log and stderr.log. Their names are known in
// advance, so whoever can write below DIR can plant a link at one of them; nothing planted there may
// make acc-launch write anywhere but into a file it created itself.
#include <string>

namespace acc::launcher {

struct RankLogFiles {
  int stdout_fd = -1;
  int stderr_fd = -1;
};

// Creates DIR (and its parents, following links on the way: DIR is the user's own choice) and below it
// attempt_<attempt>/rank_<rank>, opened without following a link at either name; then creates both
// files. Each file is a new one (O_CREAT|O_EXCL|O_NOFOLLOW under a random name beside its final name)
// renamed over the final name: a link or an older log there is replaced, never written through, and
// the job runs. A link (or anything not a directory) at attempt_K or rank_R is refused: acc-launch never
// makes one, and neither following nor deleting it is safe. Throws UsageError naming the path and the
// fix; nothing is left open then.
RankLogFiles open_rank_logs(const std::string& log_dir, int attempt, int rank);

// Checked before anything starts, creating nothing: --log_dir is a directory, or can be created as one
// (the nearest part of it that exists is a directory). Throws UsageError naming what is in the way,
// e.g. "--log_dir '/dev/null/x' cannot be created: '/dev/null' is a character device, not a directory".
void check_log_dir(const std::string& log_dir);

}  // namespace acc::launcher

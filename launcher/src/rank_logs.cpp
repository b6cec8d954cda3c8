#include "rank_logs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <acc_common/new_file.h>
#include <acc_common/path_kind.h>

#include "errors.h"

namespace acc::launcher {
namespace {

namespace fs = std::filesystem;

// A descriptor closed when an error leaves the function that opened it.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

std::string joined(const std::string& directory, const std::string& name) { return (fs::path(directory) / name).string(); }

[[noreturn]] void refuse(const std::string& what, const std::string& path, int error, const std::string& fix) {
  throw UsageError("cannot " + what + " '" + path + "': " + std::strerror(error) + "; " + fix);
}

// attempt_K or rank_R below a directory already open. Everything is relative to the parent's
// descriptor, so a link planted at the parent's name after it was opened changes nothing.
int open_subdirectory(int parent, const std::string& parent_path, const std::string& name) {
  const std::string path = joined(parent_path, name);
  // mkdirat fails on any existing name, a link included, and then the open below decides.
  if (::mkdirat(parent, name.c_str(), 0777) != 0 && errno != EEXIST)
    refuse("create the log directory", path, errno, "make --log_dir writable, or choose another --log_dir");
  const int fd = ::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) return fd;
  const int error = errno;
  struct stat info {};
  if (::fstatat(parent, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(info.st_mode))
    throw UsageError("'" + path +
                     "' is a symbolic link; acc-launch never creates one there and does not follow it (a link planted "
                     "there would send the rank logs over someone else's files): remove it, or choose another "
                     "--log_dir");
  refuse("open the log directory", path, error, "remove what is there, or choose another --log_dir");
}

// A log file that is this run's own: created under a random name no one can have planted anything at,
// then renamed over `name` before any rank starts, so the logs are at their documented place while the
// job runs. Not fsynced: the supervisor keeps writing to the descriptor for as long as the rank runs.
int create_log_file(int directory, const std::string& directory_path, const std::string& name) {
  const std::string path = joined(directory_path, name);
  std::string temporary;
  int fd = -1;
  for (int tries = 0; fd < 0 && tries < 16; ++tries) {
    temporary = "." + name + "." + common::random_hex(8) + ".tmp";
    fd = ::openat(directory, temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST)
      refuse("create a log file in", directory_path, errno, "make --log_dir writable, or choose another --log_dir");
  }
  if (fd < 0) refuse("create a log file in", directory_path, EEXIST, "choose another --log_dir");
  Fd file(fd);
  if (::renameat(directory, temporary.c_str(), directory, name.c_str()) != 0) {
    const int error = errno;
    ::unlinkat(directory, temporary.c_str(), 0);
    refuse("write the log file", path, error, "remove what is there, or choose another --log_dir");
  }
  return file.release();
}

}  // namespace

void check_log_dir(const std::string& log_dir) {
  if (log_dir.empty()) return;
  const std::string fix = "; choose a directory for --log_dir (it is created if missing)";
  const common::PathKind kind = common::inspect_path(log_dir);
  if (kind.directory()) return;
  if (kind.exists()) throw UsageError("--log_dir '" + log_dir + "' is " + kind.description() + ", not a directory" + fix);
  if (kind.is_link || (kind.error != ENOENT && kind.error != ENOTDIR))
    throw UsageError("--log_dir '" + log_dir + "' is " + kind.description() + fix);
  // Missing: the nearest existing part of the path must be a directory for it to be created.
  for (fs::path part = fs::path(log_dir).lexically_normal().parent_path(); !part.empty(); part = part.parent_path()) {
    const common::PathKind above = common::inspect_path(part.string());
    if (above.directory()) return;
    if (above.exists() || above.is_link || (above.error != ENOENT && above.error != ENOTDIR))
      throw UsageError("--log_dir '" + log_dir + "' cannot be created: '" + part.string() + "' is " +
                       above.description() + ", not a directory" + fix);
    if (part == part.parent_path()) break;
  }
}

RankLogFiles open_rank_logs(const std::string& log_dir, int attempt, int rank) {
  std::error_code created;
  fs::create_directories(log_dir, created);
  if (created)
    throw UsageError("cannot create the log directory '" + log_dir + "': " + created.message() +
                     "; choose another --log_dir");
  Fd top(::open(log_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (top.get() < 0) refuse("open the log directory", log_dir, errno, "choose another --log_dir");
  const std::string attempt_name = "attempt_" + std::to_string(attempt);
  Fd attempt_dir(open_subdirectory(top.get(), log_dir, attempt_name));
  const std::string attempt_path = joined(log_dir, attempt_name);
  const std::string rank_name = "rank_" + std::to_string(rank);
  Fd rank_dir(open_subdirectory(attempt_dir.get(), attempt_path, rank_name));
  const std::string rank_path = joined(attempt_path, rank_name);
  Fd out(create_log_file(rank_dir.get(), rank_path, "stdout.log"));
  Fd err(create_log_file(rank_dir.get(), rank_path, "stderr.log"));
  return {out.release(), err.release()};
}

}  // namespace acc::launcher

#include "output/WriteTemporaries.h"

#include <llvm/Support/Regex.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

namespace accmigrate {

std::string writeTemporaryPrefix(const std::string &target) {
  return target + ".acc-migrate-" + writerTag(::getpid()) + ".";
}

std::optional<std::optional<Writer>> parseWriteTemporary(llvm::StringRef name) {
  // The host as hostTag() writes it; the pid as digits; then create_file_with_prefix's 16 hex.
  static const llvm::Regex current("^.+\\.acc-migrate-([A-Za-z0-9-]+)\\.([0-9]+)\\.[0-9a-f]{16}$");
  static const llvm::Regex previous("^.+\\.acc-migrate-[0-9a-f]{16}$");
  llvm::SmallVector<llvm::StringRef, 3> match;
  long pid;
  if (current.match(name, &match)) {
    // A pid too long for a long is no process's: the name is still acc-migrate's, its writer dead.
    if (match[2].getAsInteger(10, pid)) pid = -1;
    return std::optional<Writer>(Writer{match[1].str(), pid});
  }
  if (previous.match(name)) return std::optional<Writer>();
  return std::nullopt;
}

std::vector<RemovedTemporary> removeDeadWriteTemporaries(const std::string &dir) {
  std::vector<RemovedTemporary> removed;
  // Names are looked at and removed relative to the directory opened once: a directory renamed or
  // replaced by a link meanwhile cannot redirect the removal elsewhere.
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return removed;
  DIR *entries = ::fdopendir(fd);
  if (!entries) {
    ::close(fd);
    return removed;
  }
  const uid_t me = ::geteuid();
  while (const dirent *entry = ::readdir(entries)) {
    const std::string name = entry->d_name;
    std::optional<std::optional<Writer>> writer = parseWriteTemporary(name);
    struct stat status;
    if (!writer || ::fstatat(fd, name.c_str(), &status, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(status.st_mode) ||
        status.st_uid != me)
      continue;
    std::optional<std::string> why =
        deadWriter(*writer, llvm::sys::toTimePoint(status.st_mtim.tv_sec, status.st_mtim.tv_nsec));
    if (why && ::unlinkat(fd, name.c_str(), 0) == 0) removed.push_back({dir + "/" + name, *why});
  }
  ::closedir(entries);  // closes fd
  // In name order, not the directory's: notes that read the same on every run.
  std::sort(removed.begin(), removed.end(),
            [](const RemovedTemporary &a, const RemovedTemporary &b) { return a.path < b.path; });
  return removed;
}

}  // namespace accmigrate

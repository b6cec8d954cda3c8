#include "acc_common/path_kind.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace acc::common {

bool PathKind::regular() const { return error == 0 && S_ISREG(type); }
bool PathKind::directory() const { return error == 0 && S_ISDIR(type); }

std::string file_type_words(mode_t type) {
  if (S_ISREG(type)) return "a regular file";
  if (S_ISDIR(type)) return "a directory";
  if (S_ISFIFO(type)) return "a named pipe (FIFO)";
  if (S_ISCHR(type)) return "a character device";
  if (S_ISBLK(type)) return "a block device";
  if (S_ISSOCK(type)) return "a socket";
  if (S_ISLNK(type)) return "a symbolic link";
  return "neither a file nor a directory";
}

std::string PathKind::description() const {
  if (error != 0) {
    if (is_link && error == ENOENT) return "a dangling symbolic link";
    return error == ENOENT ? "missing" : std::string("not accessible (") + std::strerror(error) + ")";
  }
  const std::string words = file_type_words(type);
  if (!is_link) return words;
  return "a symbolic link to " + words;
}

PathKind inspect_path(const std::string& path) {
  PathKind kind;
  struct stat info {};
  kind.is_link = ::lstat(path.c_str(), &info) == 0 && S_ISLNK(info.st_mode);
  if (::stat(path.c_str(), &info) != 0) {
    kind.error = errno;
    return kind;
  }
  kind.type = info.st_mode & S_IFMT;
  return kind;
}

std::string OpenedFile::problem() const {
  if (fd >= 0) return {};
  if (kind.error == ENOENT) return kind.is_link ? "is a dangling symbolic link" : "does not exist";
  if (kind.error != 0) return std::string("cannot be read (") + std::strerror(kind.error) + ")";
  if (!kind.regular()) return "is " + kind.description() + ", not a regular file";
  return std::string("cannot be opened (") + std::strerror(error) + ")";
}

OpenedFile open_regular_file(const std::string& path) {
  OpenedFile file;
  file.kind = inspect_path(path);
  if (!file.kind.regular()) {
    file.error = file.kind.error;
    return file;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    file.error = errno;
    return file;
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    file.error = errno;
    if (file.error == 0) file.kind.type = info.st_mode & S_IFMT;
    ::close(fd);
    return file;
  }
  file.fd = fd;
  file.size = static_cast<long long>(info.st_size);
  return file;
}

std::optional<std::string> read_regular_file(const std::string& path, long long max_bytes, std::string* problem) {
  const OpenedFile file = open_regular_file(path);
  auto refuse = [&](const std::string& why) -> std::optional<std::string> {
    if (problem) *problem = why;
    return std::nullopt;
  };
  if (file.fd < 0) return refuse(file.problem());
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{file.fd};
  const std::string too_large = "is over " + std::to_string(max_bytes) + " bytes";
  if (file.size > max_bytes) return refuse(too_large);
  // To the end rather than st_size bytes (files in /proc say 0), but never past the limit.
  std::string text;
  char buffer[64 * 1024];
  for (;;) {
    const ssize_t got = ::read(file.fd, buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return refuse(std::string("cannot be read (") + std::strerror(errno) + ")");
    if (got == 0) return text;
    text.append(buffer, static_cast<size_t>(got));
    if (static_cast<long long>(text.size()) > max_bytes) return refuse(too_large);
  }
}

}  // namespace acc::common

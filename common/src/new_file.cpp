#include "acc_common/new_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace acc::common {
namespace {

// A collision of 64 random bits is not expected; a few tries only guard against a planted name.
constexpr int kAttempts = 16;

std::string directory_of(const std::string& target) {
  const auto slash = target.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : target.substr(0, slash);
}

std::string name_of(const std::string& target) {
  const auto slash = target.rfind('/');
  return slash == std::string::npos ? target : target.substr(slash + 1);
}

// "<directory>/.<name><middle>": what a random part and a suffix complete to a hidden name beside `target`.
std::string hidden_prefix(const std::string& target, const std::string& middle) {
  const std::string directory = directory_of(target);
  return (directory == "/" ? "" : directory) + "/." + name_of(target) + middle;
}

std::string failure(const std::string& action, const std::string& path) {
  return "cannot " + action + " '" + path + "': " + std::strerror(errno);
}

bool sync_directory_of(const std::string& path) {
  const int fd = ::open(directory_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::fsync(fd) == 0 || errno == EINVAL;  // some filesystems cannot fsync a directory
  ::close(fd);
  return ok;
}

}  // namespace

std::string random_hex(size_t bytes) {
  std::string raw(bytes, '\0');
  for (size_t done = 0; done < bytes;) {
    const ssize_t got = ::getrandom(raw.data() + done, bytes - done, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // cannot happen on Linux >= 3.17 for small requests; the pid below still varies
    done += static_cast<size_t>(got);
  }
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes);
  for (unsigned char byte : raw) {
    out.push_back(digits[byte >> 4]);
    out.push_back(digits[byte & 15]);
  }
  return out;
}

NewFile create_file_with_prefix(const std::string& prefix, const std::string& suffix, mode_t mode) {
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    NewFile file{-1, prefix + random_hex(8) + suffix};
    file.fd = ::open(file.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (file.fd >= 0 || errno != EEXIST) return file;
  }
  return {};
}

NewFile create_file_beside(const std::string& target, mode_t mode) {
  return create_file_with_prefix(hidden_prefix(target, "."), ".tmp", mode);
}

std::string write_new_file(const NewFile& file, const char* data, size_t size) {
  for (size_t done = 0; done < size;) {
    const ssize_t wrote = ::write(file.fd, data + done, size - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote < 0) return failure("write", file.path);
    done += static_cast<size_t>(wrote);
  }
  return {};
}

void abandon_new_file(NewFile& file) {
  if (file.fd >= 0) ::close(file.fd);
  file.fd = -1;
  if (!file.path.empty()) ::unlink(file.path.c_str());
  file.path.clear();
}

std::string commit_new_file(NewFile& file, const std::string& target) {
  std::string error;
  if (::fsync(file.fd) != 0) error = failure("fsync", file.path);
  if (::close(file.fd) != 0 && error.empty()) error = failure("close", file.path);
  file.fd = -1;
  if (error.empty() && ::rename(file.path.c_str(), target.c_str()) != 0) error = failure("rename over", target);
  if (!error.empty()) {
    ::unlink(file.path.c_str());
    return error;
  }
  if (!sync_directory_of(target)) return failure("fsync the directory of", target);
  return {};
}

std::string replace_file(const std::string& target, const std::string& contents, mode_t mode) {
  NewFile file = create_file_beside(target, mode);
  if (file.fd < 0) return failure("create a file beside", target);
  if (std::string error = write_new_file(file, contents.data(), contents.size()); !error.empty()) {
    abandon_new_file(file);
    return error;
  }
  return commit_new_file(file, target);
}

std::string create_directory_beside(const std::string& target, const std::string& infix, mode_t mode) {
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    std::string path = hidden_prefix(target, infix) + random_hex(8);
    if (::mkdir(path.c_str(), mode) == 0) return path;
    if (errno != EEXIST) return {};
  }
  return {};
}

}  // namespace acc::common

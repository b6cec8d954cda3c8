#include "NewFile.h"

#include <llvm/Support/Path.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <random>

namespace accmigrate {
namespace {

// 64 random bits do not collide by chance; the retries only outlast names someone planted.
constexpr int kAttempts = 16;

std::string reason() { return std::strerror(errno); }

std::string directoryOf(const std::string &file) {
  llvm::StringRef parent = llvm::sys::path::parent_path(file);
  return parent.empty() ? "." : parent.str();
}

// Makes a rename durable: without it a crash can lose the directory entry the rename wrote.
bool syncDirectoryOf(const std::string &file) {
  int fd = ::open(directoryOf(file).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::fsync(fd) == 0 || errno == EINVAL;  // some file systems cannot fsync a directory
  ::close(fd);
  return ok;
}

}  // namespace

std::string randomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  size_t done = 0;
  while (done < bytes) {
    ssize_t got = ::getrandom(raw.data() + done, bytes - done, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    done += static_cast<size_t>(got);
  }
  // Without getrandom (a kernel before 3.17), std::random_device reads /dev/urandom.
  std::random_device device;
  for (; done < bytes; ++done) raw[done] = static_cast<char>(device());
  static const char digits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char byte : raw) {
    hex.push_back(digits[byte >> 4]);
    hex.push_back(digits[byte & 15]);
  }
  return hex;
}

NewFile createNewFile(const std::string &prefix, const std::string &suffix, unsigned mode, std::string &error) {
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    NewFile file{-1, prefix + randomHex(8) + suffix};
    file.fd = ::open(file.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (file.fd >= 0) return file;
    if (errno != EEXIST) break;
  }
  error = "cannot create a file in " + directoryOf(prefix) + ": " + reason();
  return {};
}

bool writeAll(const NewFile &file, llvm::StringRef bytes, std::string &error) {
  for (size_t done = 0; done < bytes.size();) {
    ssize_t wrote = ::write(file.fd, bytes.data() + done, bytes.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote < 0) {
      error = "cannot write " + file.path + ": " + reason();
      return false;
    }
    done += static_cast<size_t>(wrote);
  }
  return true;
}

bool commitNewFile(NewFile &file, const std::string &target, std::string &error) {
  if (::fsync(file.fd) != 0) error = "cannot write " + file.path + " to disk: " + reason();
  if (::close(file.fd) != 0 && error.empty()) error = "cannot write " + file.path + ": " + reason();
  file.fd = -1;
  if (error.empty() && ::rename(file.path.c_str(), target.c_str()) != 0)
    error = "cannot replace " + target + ": " + reason();
  if (!error.empty()) {
    ::unlink(file.path.c_str());
    return false;
  }
  if (!syncDirectoryOf(target)) {
    error = "cannot write the directory of " + target + " to disk: " + reason();
    return false;
  }
  return true;
}

void abandonNewFile(NewFile &file) {
  if (file.fd >= 0) ::close(file.fd);
  file.fd = -1;
  if (!file.path.empty()) ::unlink(file.path.c_str());
  file.path.clear();
}

}  // namespace accmigrate

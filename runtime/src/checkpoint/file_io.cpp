#include "checkpoint/file_io.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <acc/errors.h>

namespace acc::detail {

void throw_system_error(const std::string& action, const std::string& path) {
  throw Error("acc: cannot " + action + " '" + path + "': " + std::strerror(errno));
}

FileHandle::~FileHandle() {
  if (fd_ >= 0) ::close(fd_);
}

FileHandle::FileHandle(FileHandle&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) {
  other.fd_ = -1;
}

FileHandle& FileHandle::operator=(FileHandle&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

void FileHandle::write_all(const void* data, size_t size) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    // Linux writes at most ~2 GiB per call; loop for larger tensors and for partial writes.
    const ssize_t written = ::write(fd_, bytes, size < (1u << 30) ? size : (1u << 30));
    if (written < 0) {
      if (errno == EINTR) continue;
      throw_system_error("write", path_);
    }
    bytes += written;
    size -= static_cast<size_t>(written);
  }
}

void FileHandle::close() {
  if (fd_ < 0) return;
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw_system_error("close", path_);
}

FileHandle create_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_system_error("create", path);
  return FileHandle(fd, path);
}

FileHandle open_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_system_error("open", path);
  return FileHandle(fd, path);
}

void read_exact_at(const FileHandle& file, void* out, size_t size, uint64_t offset) {
  auto* bytes = static_cast<char*>(out);
  for (size_t done = 0; done < size;) {
    const ssize_t got = ::pread(file.fd(), bytes + done, size - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw_system_error("read", file.path());
    if (got == 0) throw Error("acc: '" + file.path() + "' ends before the bytes it should hold (truncated?)");
    done += static_cast<size_t>(got);
  }
}

void write_text_file(const std::string& path, const std::string& text) {
  auto file = create_file(path);
  file.write_all(text.data(), text.size());
  file.close();
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_system_error("open", path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void remove_tree(const std::string& path) {
  auto remove_one = [](const char* entry, const struct stat*, int, struct FTW*) {
    return ::remove(entry) == 0 || errno == ENOENT ? 0 : -1;
  };
  if (::nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT) {
    throw_system_error("remove", path);
  }
}

void sync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_system_error("open for fsync", path);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw_system_error("fsync", path);
}

}  // namespace acc::detail

#include "checkpoint/file_io.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <climits>
#include <cstring>
#include <filesystem>
#include <memory>

#include <acc/errors.h>
#include <acc_common/new_file.h>

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
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0 && errno == ELOOP) {
    throw Error("acc: '" + path + "' is a symbolic link; acc writes only regular files it creates (remove the link)");
  }
  if (fd < 0) throw_system_error("create", path);
  return FileHandle(fd, path);
}

std::string file_kind(unsigned mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

struct ConfinedReads::Scope {
  std::string lexical;  // absolute, normalised: which paths are inside
  std::string real;     // realpath: where their files must be
  Scope* previous = nullptr;
};

namespace {

thread_local ConfinedReads::Scope* confinement = nullptr;

std::string absolute_normalised(const std::string& path) {
  std::error_code error;
  auto absolute = std::filesystem::absolute(path, error);
  std::string out = (error ? std::filesystem::path(path) : absolute).lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

bool is_under(const std::string& path, const std::string& directory) {
  return directory == "/" ? path.size() > 1 && path[0] == '/'
                          : path.size() > directory.size() && path.compare(0, directory.size(), directory) == 0 &&
                                path[directory.size()] == '/';
}

// What the symbolic link at `path` names ("" when `path` is not a link): a path, never file contents.
std::string link_target(const std::string& path) {
  std::string target(4096, '\0');
  const ssize_t length = ::readlink(path.c_str(), target.data(), target.size());
  if (length < 0) return "";
  target.resize(static_cast<size_t>(length));
  return target;
}

// Where the descriptor's file really is: /proc knows for the descriptor itself (no race with a
// rename); without /proc, realpath of the name.
std::string real_location(int fd, const std::string& path) {
  std::string real = link_target("/proc/self/fd/" + std::to_string(fd));
  if (!real.empty() && real[0] == '/') return real;
  char resolved[PATH_MAX];
  return ::realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : std::string();
}

// CheckpointError when `path` is under the thread's ConfinedReads but its file (the descriptor
// `fd`) is not: a link led out.
void check_confined(const std::string& path, int fd) {
  const ConfinedReads::Scope* scope = confinement;
  if (scope == nullptr || !is_under(absolute_normalised(path), scope->lexical)) return;
  const std::string real = real_location(fd, path);
  if (!real.empty() && is_under(real, scope->real)) return;
  const std::string link = link_target(path);
  const std::string how = link.empty() ? "leads through a symbolic link on its way to '" + real + "'"
                                       : "is a symbolic link to '" + link + "'";
  throw CheckpointError("acc: '" + path + "' " + how + ", outside the checkpoint directory '" + scope->lexical +
                        "'; acc reads only the files inside a checkpoint (neither acc nor Accelerate writes links "
                        "there): replace the link with a copy of the file, or load a checkpoint whose files are its own");
}

}  // namespace

ConfinedReads::ConfinedReads(const std::string& directory) : previous_(confinement) {
  auto scope = std::make_unique<Scope>();
  scope->lexical = absolute_normalised(directory);
  char resolved[PATH_MAX];
  // The checkpoint directory itself may be reached through links (a project_dir on scratch
  // storage): what counts is where it really is.
  scope->real = ::realpath(directory.c_str(), resolved) != nullptr ? std::string(resolved) : scope->lexical;
  scope->previous = previous_;
  confinement = scope.release();
}

ConfinedReads::~ConfinedReads() {
  delete confinement;
  confinement = previous_;
}

FileHandle open_file(const std::string& path) {
  // O_PATH opens nothing: a FIFO does not wait for a writer, a device's open has no effect. What
  // the file is and where it is are checked on this descriptor first.
  const int probe_fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
  if (probe_fd < 0) throw_system_error("open", path);
  const FileHandle probe(probe_fd, path);
  struct stat found {};
  if (::fstat(probe_fd, &found) != 0) throw_system_error("stat", path);
  if (!S_ISREG(found.st_mode)) {
    const std::string link = link_target(path);
    const std::string what = "acc: '" + path + "' is " +
                             (link.empty() ? "" : "a symbolic link to '" + link + "', which is ") +
                             file_kind(found.st_mode) + ", not a file acc can read; ";
    if (confinement != nullptr && is_under(absolute_normalised(path), confinement->lexical)) {
      throw CheckpointError(what + "a checkpoint holds only the regular files its save wrote: put the saved "
                                   "file back, or load another checkpoint");
    }
    throw Error(what + "name a regular file");
  }
  check_confined(path, probe_fd);
  // O_NONBLOCK: should another file have been swapped in since, a FIFO still cannot block; the
  // identity check below refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw_system_error("open", path);
  FileHandle file(fd, path);
  struct stat opened {};
  if (::fstat(fd, &opened) != 0) throw_system_error("stat", path);
  if (opened.st_dev != found.st_dev || opened.st_ino != found.st_ino) {
    throw Error("acc: '" + path + "' was replaced while acc opened it; make sure nothing writes to the files "
                "being read, and try again");
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return file;
}

uint64_t file_size(const FileHandle& file) {
  struct stat info {};
  if (::fstat(file.fd(), &info) != 0) throw_system_error("stat", file.path());
  return static_cast<uint64_t>(info.st_size);
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

void write_file_atomically(const std::string& path, const std::function<void(const std::string&)>& write) {
  auto reserved = common::create_file_beside(path);
  if (reserved.fd < 0) throw_system_error("create a file beside", path);
  ::close(reserved.fd);
  try {
    write(reserved.path);
    sync_path(reserved.path);
    if (std::rename(reserved.path.c_str(), path.c_str()) != 0) throw_system_error("rename into", path);
  } catch (...) {
    ::unlink(reserved.path.c_str());
    throw;
  }
}

void write_text_file(const std::string& path, const std::string& text) {
  auto file = create_file(path);
  file.write_all(text.data(), text.size());
  file.close();
}

std::string read_text_file(const std::string& path) {
  const auto file = open_file(path);
  std::string bytes(file_size(file), '\0');
  read_exact_at(file, bytes.data(), bytes.size(), 0);
  return bytes;
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
  // O_NONBLOCK: a FIFO planted among the files being synced fails fsync instead of blocking the save.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw_system_error("open for fsync", path);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw_system_error("fsync", path);
}

}  // namespace acc::detail

#include "checkpoint/directory.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <regex>

#include <acc/errors.h>
#include <acc_common/new_file.h>

#include "checkpoint/file_io.h"

namespace fs = std::filesystem;

namespace acc::detail {
namespace {

std::string parent_of(const std::string& path) {
  const auto parent = fs::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

// ".<name>.<kind>-<token>" beside `final_path`.
std::string hidden_sibling(const std::string& final_path, const std::string& kind, const std::string& token) {
  return (fs::path(parent_of(final_path)) / ("." + fs::path(final_path).filename().string() + "." + kind + "-" + token))
      .string();
}

// The names this file gives: a random token, and the fixed names of acc before it.
const std::regex kTrash(R"(\..+\.trash-[0-9a-f]{16})");
const std::regex kTemporary(R"(\..+\.tmp-[0-9a-f]{16})");
const std::regex kOldAutomaticTemporary(R"(\.checkpoint_\d+\.tmp(\.old)?)");

bool is_real_directory(const std::string& path) {
  struct stat info {};
  return ::lstat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

// True when no live process holds the temporary's flock (its writer is gone); the caller removes it.
bool writer_is_gone(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);
  return free;
}

// save_state's error when the checkpoint's folder cannot be written: the user's directory and the
// system's reason, never the hidden temporary (an implementation detail) or a std::filesystem_error.
[[noreturn]] void throw_unwritable(const std::string& final_path, const std::string& parent, int error) {
  std::string reason = std::strerror(error);
  if (!reason.empty()) reason[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(reason[0])));
  throw CheckpointError("acc: save_state cannot write the checkpoint '" + final_path + "': '" + parent +
                        "' is not writable (" + reason + "). Pass save_state a directory this process can "
                        "write (check its permissions, that its filesystem is mounted read-write and that no "
                        "file stands where a directory is expected), or set ProjectConfiguration().project_dir to one");
}

}  // namespace

CheckpointDirectoryWriter::CheckpointDirectoryWriter(std::string final_path, const std::string& token, bool create)
    : final_(fs::path(final_path).lexically_normal().string()), token_(token), owner_(create) {
  while (final_.size() > 1 && final_.back() == '/') final_.pop_back();  // "dir/" names "dir"
  temporary_ = hidden_sibling(final_, "tmp", token_);
  if (!create) {
    if (!is_real_directory(temporary_)) {
      throw CheckpointError("acc: '" + temporary_ + "' is not the directory save_state's writer created (a link, "
                            "a file, or missing: the checkpoint's folder is not shared by this process's "
                            "writer); remove it, or set ProjectConfiguration().save_on_each_node(true)");
    }
    return;
  }
  const auto parent = parent_of(final_);
  std::error_code created;
  fs::create_directories(parent, created);
  if (created) throw_unwritable(final_, parent, created.value());
  remove_abandoned_checkpoints(parent, fs::path(final_).filename().string());
  if (::mkdir(temporary_.c_str(), 0777) != 0) {
    if (errno != EEXIST) throw_unwritable(final_, parent, errno);
    throw_system_error("create the checkpoint directory", temporary_);  // a name collision: ours to explain
  }
  lock_fd_ = ::open(temporary_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (lock_fd_ < 0 || ::flock(lock_fd_, LOCK_EX) != 0) throw_system_error("lock", temporary_);
}

CheckpointDirectoryWriter::~CheckpointDirectoryWriter() {
  if (owner_ && !committed_) {
    try {
      remove_tree(temporary_);
    } catch (const Error&) {
      // Destructors must not throw; the next save removes the leftover (its lock is free then).
    }
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

void CheckpointDirectoryWriter::sync_files(const std::vector<std::string>& paths) {
  for (const auto& path : paths) sync_path(path);
}

void CheckpointDirectoryWriter::commit() {
  write_text_file(file(kCheckpointCompleteMarker), "complete\n");
  for (const auto& entry : fs::recursive_directory_iterator(temporary_)) {
    sync_path(entry.path().string());
  }
  sync_path(temporary_);
  if (fs::exists(fs::symlink_status(final_))) {
    // rename() cannot replace a non-empty directory: move the old one to the trash first. A crash
    // between the two renames leaves no directory at final_ (never a broken one).
    const std::string old = hidden_sibling(final_, "trash", token_);
    if (std::rename(final_.c_str(), old.c_str()) != 0) throw_system_error("move aside", final_);
    if (std::rename(temporary_.c_str(), final_.c_str()) != 0) throw_system_error("rename into", final_);
    remove_tree(old);
  } else if (std::rename(temporary_.c_str(), final_.c_str()) != 0) {
    throw_system_error("rename into", final_);
  }
  committed_ = true;
  sync_path(parent_of(final_));
}

void remove_checkpoint(const std::string& directory) {
  const std::string trash = hidden_sibling(directory, "trash", common::random_hex(8));
  if (std::rename(directory.c_str(), trash.c_str()) != 0) throw_system_error("move to the trash", directory);
  remove_tree(trash);
}

void remove_abandoned_checkpoints(const std::string& parent, const std::string& name) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(parent, error)) {
    const std::string entry_name = entry.path().filename().string();
    const std::string path = entry.path().string();
    if (!is_real_directory(path)) continue;  // ours are directories; a link here is left alone
    const bool old_temporary = entry_name == "." + name + ".tmp" || entry_name == "." + name + ".tmp.old" ||
                               std::regex_match(entry_name, kOldAutomaticTemporary);
    if (std::regex_match(entry_name, kTrash) || old_temporary ||
        (std::regex_match(entry_name, kTemporary) && writer_is_gone(path))) {
      remove_tree(path);
    }
  }
}

}  // namespace acc::detail

namespace acc {

bool is_complete_checkpoint(const std::string& directory) {
  // The marker itself, not what a link there names: save_state writes a plain file.
  return fs::is_regular_file(fs::symlink_status(fs::path(directory) / kCheckpointCompleteMarker));
}

}  // namespace acc

#include "checkpoint/directory.h"

#include <cstdio>
#include <filesystem>

#include <acc/errors.h>

#include "checkpoint/file_io.h"

namespace fs = std::filesystem;

namespace acc::detail {

std::string checkpoint_temporary_path(const std::string& final_path) {
  fs::path path = fs::path(final_path).lexically_normal();
  if (path.filename().empty()) path = path.parent_path();  // "dir/" names "dir"
  return (path.parent_path() / ("." + path.filename().string() + ".tmp")).string();
}

CheckpointDirectoryWriter::CheckpointDirectoryWriter(std::string final_path, bool create)
    : final_(fs::path(final_path).lexically_normal().string()),
      temporary_(checkpoint_temporary_path(final_path)),
      owner_(create) {
  if (!final_.empty() && final_.back() == '/') final_.pop_back();
  if (!create) return;
  const auto parent = fs::path(temporary_).parent_path();
  if (!parent.empty()) fs::create_directories(parent);
  remove_tree(temporary_);  // an interrupted save of the same checkpoint
  fs::create_directory(temporary_);
}

CheckpointDirectoryWriter::~CheckpointDirectoryWriter() {
  if (owner_ && !committed_) {
    try {
      remove_tree(temporary_);
    } catch (const Error&) {
      // Destructors must not throw; the next save of this name removes the leftover.
    }
  }
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
  if (fs::exists(final_)) {
    // rename() cannot replace a non-empty directory: move the old one aside first. A crash
    // between the two renames leaves no directory at final_ (never a broken one).
    const std::string old = checkpoint_temporary_path(final_) + ".old";
    remove_tree(old);
    if (std::rename(final_.c_str(), old.c_str()) != 0) throw_system_error("move aside", final_);
    if (std::rename(temporary_.c_str(), final_.c_str()) != 0) throw_system_error("rename into", final_);
    remove_tree(old);
  } else if (std::rename(temporary_.c_str(), final_.c_str()) != 0) {
    throw_system_error("rename into", final_);
  }
  committed_ = true;
  auto parent = fs::path(final_).parent_path();
  sync_path(parent.empty() ? "." : parent.string());
}

}  // namespace acc::detail

namespace acc {

bool is_complete_checkpoint(const std::string& directory) {
  return fs::is_regular_file(fs::path(directory) / kCheckpointCompleteMarker);
}

}  // namespace acc

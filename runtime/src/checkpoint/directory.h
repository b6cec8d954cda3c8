#pragma once
// Crash-safe checkpoint directories. Files are written into a hidden temporary sibling
// (".<name>.tmp"); commit() adds the completion marker, fsyncs every file and the directory,
// renames it into place and fsyncs the parent. A process killed at any moment therefore leaves
// either no directory named <name> or a complete one.
#include <string>
#include <vector>

#include <acc/checkpointing.h>

namespace acc::detail {

class CheckpointDirectoryWriter {
 public:
  /// `final_path`: where the checkpoint will be. `create`: remove a leftover temporary directory
  /// of an interrupted save and create a fresh one (exactly one process per filesystem does this;
  /// the others construct with create=false after a barrier and write their own files into it).
  CheckpointDirectoryWriter(std::string final_path, bool create);
  /// Removes the temporary directory if commit() was not reached (an exception unwound the save).
  ~CheckpointDirectoryWriter();
  CheckpointDirectoryWriter(const CheckpointDirectoryWriter&) = delete;
  CheckpointDirectoryWriter& operator=(const CheckpointDirectoryWriter&) = delete;

  /// The temporary directory that files are written into now.
  const std::string& path() const { return temporary_; }
  std::string file(const std::string& name) const { return temporary_ + "/" + name; }
  const std::string& final_path() const { return final_; }

  /// fsync of the files this process wrote (each process calls it for its own files before the
  /// barrier that precedes commit()).
  static void sync_files(const std::vector<std::string>& paths);
  /// Marker, fsync of every file and of the directory, rename into place (an existing directory
  /// at final_path is replaced), fsync of the parent.
  void commit();
  /// Leaves the temporary directory for another process to commit or remove.
  void release() { owner_ = false; }

 private:
  std::string final_;
  std::string temporary_;
  bool owner_;
  bool committed_ = false;
};

/// The temporary sibling that CheckpointDirectoryWriter uses for `final_path`.
std::string checkpoint_temporary_path(const std::string& final_path);

}  // namespace acc::detail

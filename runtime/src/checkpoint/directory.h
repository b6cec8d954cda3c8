#pragma once
// Crash-safe checkpoint directories. Files are written into a hidden temporary sibling,
// ".<name>.tmp-<token>", created with mkdir (like O_EXCL, it fails on any existing name, a planted
// link included) under a random token that every process of the save shares; commit() adds the
// completion marker, fsyncs every file and the directory, renames it into place and fsyncs the
// parent. A process killed at any moment therefore leaves either no directory named <name> or a
// complete one. The creator holds an flock on the temporary until it is committed or removed, so
// the next save can tell the leftovers of dead writers (lock free: removed) from a save running now.
#include <string>
#include <vector>

#include <acc/checkpointing.h>

namespace acc::detail {

class CheckpointDirectoryWriter {
 public:
  /// `final_path`: where the checkpoint will be. `token`: the random part of the temporary's name,
  /// the same on every process of one save. `create`: remove the leftovers of dead writers beside
  /// it and create the temporary directory (exactly one process per filesystem does this; the
  /// others construct with create=false after a barrier, check that the directory is the real one,
  /// and write their own files into it).
  CheckpointDirectoryWriter(std::string final_path, const std::string& token, bool create);
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

 private:
  std::string final_;
  std::string token_;
  std::string temporary_;
  bool owner_;
  int lock_fd_ = -1;  // the creator's flock on temporary_
  bool committed_ = false;
};

/// Removes `directory` crash-safely: renamed to a hidden trash name first (one atomic step: a kill
/// leaves either the checkpoint or trash, never a half-removed checkpoint), then deleted.
void remove_checkpoint(const std::string& directory);

/// Removes what interrupted saves and removals left in `parent`: trash, temporaries whose writer is
/// gone (their flock is free), and the fixed-name temporaries of acc before the flock
/// (".checkpoint_N.tmp", or ".<name>.tmp" for the checkpoint `name` about to be saved).
void remove_abandoned_checkpoints(const std::string& parent, const std::string& name);

}  // namespace acc::detail

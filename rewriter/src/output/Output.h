// From edits to files: merge the edits of all translation units (a header included by several
// sources is edited once), format edited lines with the project's .clang-format, and write the
// result in place (atomically) or into a copy of the tree.
#pragma once
#include "engine/Result.h"
#include "output/WriteTemporaries.h"

#include <string>
#include <vector>

namespace accmigrate {

struct FileChange {
  std::string path;  // absolute
  std::string before, after;
  std::vector<Edit> edits;
};

// Files whose text changes. Edits of units that failed to parse are never applied; edits that
// overlap each other are dropped with a finding appended to `findings`.
std::vector<FileChange> mergeEdits(const std::vector<UnitResult> &units, std::vector<Finding> &findings);

// Replaces each file by a temporary written next to it (WriteTemporaries.h:
// FILE.acc-migrate-<host>.<pid>.<16 hex>, created with O_EXCL|O_NOFOLLOW: acc_common/new_file.h),
// fsynced and renamed over it: a reader (or a kill) never sees a partial file, and a link planted at
// any name involved is replaced, never written through. With `backupSuffix`, the original is kept as
// path+suffix first. Both keep the original's permission bits. First, in each directory it writes to,
// the temporaries that killed runs left are removed (removeDeadWriteTemporaries), and appended to
// `removed`.
bool writeInPlace(const std::vector<FileChange> &changes, const std::string &backupSuffix,
                  std::vector<RemovedTemporary> &removed, std::string &error);

// Copies every file under `roots` (directories, or single files) to `outputDir`, relative to `base`,
// with the changed files' new text, each as writeInPlace writes (a link already at a copy's name is
// replaced) with its source's permission bits; killed runs' temporaries in each directory of the
// copy are removed before its first file is written, and appended to `removed`.
bool writeOutputDir(const std::vector<FileChange> &changes, const std::vector<std::string> &roots,
                    const std::string &base, const std::string &outputDir, std::vector<RemovedTemporary> &removed,
                    std::string &error);

}  // namespace accmigrate

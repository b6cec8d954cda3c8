#include "output/Output.h"
#include "acc_common/new_file.h"

#include <clang/Format/Format.h>
#include <clang/Tooling/Core/Replacement.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/raw_ostream.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <set>

namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;
using clang::tooling::Replacement;
using clang::tooling::Replacements;

namespace accmigrate {
namespace {

bool hasClangFormatFile(llvm::StringRef file) {
  for (llvm::SmallString<256> dir = path::parent_path(file); !dir.empty(); dir = path::parent_path(dir)) {
    if (fs::exists(dir + "/.clang-format") || fs::exists(dir + "/_clang-format")) return true;
    if (path::parent_path(dir) == dir) break;
  }
  return false;
}

// Only the edited lines follow the style; the rest of the file stays byte for byte.
std::string applyReplacements(const std::string &path, const std::string &code, const Replacements &replacements) {
  Replacements toApply = replacements;
  // Build files (cmake-link's edits) are not C++: clang-format would mangle them.
  llvm::StringRef name = path::filename(path);
  bool buildFile = name == "CMakeLists.txt" || name.endswith(".cmake");
  if (!buildFile && hasClangFormatFile(path)) {
    llvm::Expected<clang::format::FormatStyle> style = clang::format::getStyle("file", path, "none", code);
    if (style) {
      llvm::Expected<Replacements> formatted = clang::format::formatReplacements(code, replacements, *style);
      if (formatted) toApply = *formatted;
      else llvm::consumeError(formatted.takeError());
    } else {
      llvm::consumeError(style.takeError());
    }
  }
  llvm::Expected<std::string> result = clang::tooling::applyAllReplacements(code, toApply);
  if (!result) {
    llvm::consumeError(result.takeError());
    return code;
  }
  return *result;
}

}  // namespace

std::vector<FileChange> mergeEdits(const std::vector<UnitResult> &units, std::vector<Finding> &findings) {
  std::map<std::string, std::vector<Edit>> byFile;
  for (const UnitResult &unit : units)
    if (unit.parsed)
      for (const Edit &edit : unit.edits) byFile[edit.file].push_back(edit);

  std::vector<FileChange> changes;
  for (auto &[file, edits] : byFile) {
    // Stable: edits at one offset keep the order the rules made them in, insertions before a
    // replacement that starts there (text inserted at X goes before the text that replaces [X, Y)).
    std::stable_sort(edits.begin(), edits.end(), [](const Edit &a, const Edit &b) {
      return a.offset != b.offset ? a.offset < b.offset : (a.length == 0 && b.length != 0);
    });
    std::vector<Edit> kept;
    for (const Edit &edit : edits) {
      bool duplicate = std::any_of(kept.begin(), kept.end(), [&](const Edit &k) {
        return k.offset == edit.offset && k.length == edit.length && k.text == edit.text;
      });
      if (duplicate) continue;  // the same header seen from two sources, or two instantiations
      if (!kept.empty()) {
        const Edit &prev = kept.back();
        bool overlaps = edit.offset < prev.offset + prev.length ||
                        (edit.offset == prev.offset && edit.length && prev.length);
        if (overlaps) {
          findings.push_back({edit.file, edit.line, edit.column, edit.rule,
                              "conflicts with an edit of rule " + prev.rule + " at the same place",
                              "change it by hand to `" + edit.text + "`", Finding::Level::Warning});
          continue;
        }
      }
      kept.push_back(edit);
    }
    auto buffer = llvm::MemoryBuffer::getFile(file);
    if (!buffer) continue;
    FileChange change;
    change.path = file;
    change.before = (*buffer)->getBuffer().str();
    // Edits that touch (insertions at one offset, an insertion at the start or the end of a
    // replacement) become one replacement, in order: Replacements refuses to order them itself.
    Replacements replacements;
    for (size_t i = 0; i < kept.size();) {
      Edit merged = kept[i++];
      while (i < kept.size() && kept[i].offset == merged.offset + merged.length &&
             (kept[i].length == 0 || merged.length == 0)) {
        merged.text += kept[i].text;
        merged.length += kept[i++].length;
      }
      if (llvm::Error err = replacements.add(Replacement(file, merged.offset, merged.length, merged.text)))
        llvm::consumeError(std::move(err));
    }
    change.after = applyReplacements(file, change.before, replacements);
    change.edits = kept;
    if (change.after != change.before) changes.push_back(std::move(change));
  }
  return changes;
}

namespace {

// The permission bits (setuid to others') of `file`, which what replaces or copies it keeps.
std::optional<unsigned> permissionsOf(const std::string &file) {
  struct stat status;
  if (::stat(file.c_str(), &status) != 0) return std::nullopt;
  return status.st_mode & 07777;
}

using acc::common::NewFile;

// A new file beside `target` (acc_common/new_file.h: a random name, O_EXCL|O_NOFOLLOW) named for this
// process (WriteTemporaries.h: a later run tells a killed writer's leftover from a live one's), with
// `mode` exactly (the umask would drop bits the original has), or the umask's default when there is none.
NewFile createBeside(const std::string &target, std::optional<unsigned> mode, std::string &error) {
  NewFile file = acc::common::create_file_with_prefix(writeTemporaryPrefix(target), "");
  if (file.fd < 0) {
    error = "cannot create a file beside " + target + ": " + std::strerror(errno);
  } else if (mode && ::fchmod(file.fd, *mode) != 0) {
    error = "cannot set the permissions of " + file.path + ": " + std::strerror(errno);
    acc::common::abandon_new_file(file);
  }
  return file;
}

bool writeBytes(const NewFile &file, llvm::StringRef bytes, std::string &error) {
  error = acc::common::write_new_file(file, bytes.data(), bytes.size());
  return error.empty();
}

bool commit(NewFile &file, const std::string &target, std::string &error) {
  error = acc::common::commit_new_file(file, target);
  return error.empty();
}

bool writeAtomically(const std::string &target, llvm::StringRef text, std::optional<unsigned> mode,
                     std::string &error) {
  NewFile file = createBeside(target, mode, error);
  if (file.fd < 0) return false;
  if (!writeBytes(file, text, error)) {
    acc::common::abandon_new_file(file);
    return false;
  }
  return commit(file, target, error);
}

// Copies `source` over `target` as writeAtomically writes: never through a link at `target`, and a
// file of any size (a data set in the tree) streamed, not read whole.
bool copyAtomically(const std::string &source, const std::string &target, std::string &error) {
  int in = ::open(source.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    error = "cannot read " + source + ": " + std::strerror(errno);
    return false;
  }
  NewFile file = createBeside(target, permissionsOf(source), error);
  char buffer[1 << 16];
  bool ok = file.fd >= 0;
  while (ok) {
    ssize_t got = ::read(in, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) error = "cannot read " + source + ": " + std::strerror(errno);
    if (got <= 0) break;
    ok = writeBytes(file, llvm::StringRef(buffer, static_cast<size_t>(got)), error);
  }
  ::close(in);
  if (ok && error.empty()) return commit(file, target, error);
  acc::common::abandon_new_file(file);
  return false;
}

void removeLeftovers(const std::string &dir, std::vector<RemovedTemporary> &removed) {
  std::vector<RemovedTemporary> here = removeDeadWriteTemporaries(dir);
  removed.insert(removed.end(), here.begin(), here.end());
}

}  // namespace

bool writeInPlace(const std::vector<FileChange> &changes, const std::string &backupSuffix,
                  std::vector<RemovedTemporary> &removed, std::string &error) {
  std::set<std::string> directories;
  for (const FileChange &change : changes) {
    directories.insert(path::parent_path(change.path).str());
    if (!backupSuffix.empty()) directories.insert(path::parent_path(change.path + backupSuffix).str());
  }
  for (const std::string &dir : directories) removeLeftovers(dir, removed);
  for (const FileChange &change : changes) {
    // The backup and the new text get the original's permission bits: a private file stays private.
    std::optional<unsigned> mode = permissionsOf(change.path);
    if ((!backupSuffix.empty() && !writeAtomically(change.path + backupSuffix, change.before, mode, error)) ||
        !writeAtomically(change.path, change.after, mode, error)) {
      // Migrating migrated code changes nothing, so running again finishes the job.
      error += "; that file and those after it are unchanged: fix that (a writable directory with free space) "
               "and run again";
      return false;
    }
  }
  return true;
}

bool writeOutputDir(const std::vector<FileChange> &changes, const std::vector<std::string> &roots,
                    const std::string &base, const std::string &outputDir, std::vector<RemovedTemporary> &removed,
                    std::string &error) {
  std::map<std::string, const FileChange *> changed;
  for (const FileChange &c : changes) changed[c.path] = &c;
  std::set<std::string> written, cleaned;
  auto copyOne = [&](const std::string &file) {
    written.insert(file);
    llvm::SmallString<256> relative(file);
    path::replace_path_prefix(relative, base, "");
    llvm::SmallString<256> target(outputDir);
    path::append(target, path::relative_path(relative));
    if (std::error_code ec = fs::create_directories(path::parent_path(target))) {
      error = "cannot create " + path::parent_path(target).str() + ": " + ec.message();
      return false;
    }
    std::string directory = path::parent_path(target).str();
    if (cleaned.insert(directory).second) removeLeftovers(directory, removed);
    auto it = changed.find(file);
    bool written = it != changed.end()
                       ? writeAtomically(std::string(target), it->second->after, permissionsOf(file), error)
                       : copyAtomically(file, std::string(target), error);
    if (!written) error += "; fix that (a writable --output-dir with free space) and run again";
    return written;
  };
  for (const std::string &root : roots) {
    if (!fs::is_directory(root)) {
      if (!copyOne(root)) return false;
      continue;
    }
    std::error_code ec;
    for (fs::recursive_directory_iterator it(root, ec), end; it != end && !ec; it.increment(ec)) {
      llvm::StringRef name = path::filename(it->path());
      if (it->type() == fs::file_type::directory_file) {
        if (name.startswith(".") || name == "build" || name.startswith("build-")) it.no_push();
        continue;
      }
      // Another run's temporary (a live writer's, or one this run could not remove) is a partial
      // file, not part of the project.
      if (parseWriteTemporary(name)) continue;
      if (it->type() == fs::file_type::regular_file && !copyOne(it->path())) return false;
    }
  }
  // Headers next to a single input file are in scope but not under a root directory.
  for (const FileChange &c : changes)
    if (!written.count(c.path) && !copyOne(c.path)) return false;
  return true;
}

}  // namespace accmigrate

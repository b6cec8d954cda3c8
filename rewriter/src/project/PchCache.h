// A precompiled header of <torch/torch.h> per set of compiler flags, kept across runs in a cache
// directory. Parsing torch's headers is most of the time spent on every file (15-20 s here);
// loading them from a PCH built with -fpch-instantiate-templates takes a fraction of that.
//
// The cache's files: <key>.pch (key: an MD5 of the flags, PchCache.cpp), torch-prefix.h (the header
// they precompile) and, while a PCH is written, <key>.pch.<host>.<pid>.<16 hex>.tmp. A PCH is
// compiled into memory and only then written under that name (created with O_EXCL|O_NOFOLLOW,
// acc_common/new_file.h), fsynced and renamed: a kill during the build (tens of seconds) leaves nothing, and
// one during the write leaves a temporary that the next open of the cache removes, since its
// writer's pid is dead (see removeDeadPchTemporaries). The cache is kept under a size limit by
// removing the PCHs unused for longest.
#pragma once
#include <clang/Tooling/CompilationDatabase.h>
#include <llvm/ADT/StringRef.h>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace accmigrate {

// What the cache is trimmed to unless --pch-cache-limit or $ACC_MIGRATE_CACHE_LIMIT says otherwise:
// about 20 PCHs of real torch (~90 MB each), a few projects' worth of flag sets.
constexpr uint64_t kDefaultPchCacheLimit = uint64_t(2) << 30;

class PchCache {
 public:
  // `extraArgs` are the user's `-- <args>`: they change the parse, so they are part of the key.
  // Opening the cache removes the temporaries of writers that died (removeDeadPchTemporaries); each
  // PCH it adds trims it to `limitBytes` (trimPchCache), keeping the PCHs this object handed out.
  PchCache(std::string dir, std::vector<std::string> extraArgs, uint64_t limitBytes = kDefaultPchCacheLimit);

  // The PCH for files compiled with `command` (built now when the cache has none), or "" when the
  // flags cannot compile <torch/torch.h>: such files are parsed without one. Taking a PCH from the
  // cache sets its mtime to now, which is what trimming orders by.
  std::string pchFor(const clang::tooling::CompileCommand &command);

  // Forgets a PCH that clang refused to load (torch's headers changed since it was built); the next
  // file with the same flags builds a fresh one.
  void discard(const std::string &pch);

  const std::string &dir() const { return dir_; }

 private:
  std::string build(const clang::tooling::CompileCommand &command, const std::string &key);
  bool writePrefixHeader(const std::string &header);
  std::string store(const std::string &key, llvm::StringRef bytes);
  std::set<std::string> inUse() const;

  std::string dir_;
  std::vector<std::string> extraArgs_;
  uint64_t limitBytes_;
  std::mutex mutex_;  // one build at a time; the other threads wait for it rather than duplicate it
  std::map<std::string, std::string> known_;  // key -> PCH path, "" when it cannot be built
};

// The default cache: $ACC_MIGRATE_CACHE, else ~/.cache/acc/migrate-pch.
std::string defaultPchCacheDir();

// A size limit as written: bytes, or a number with K, M or G (KiB, MiB, GiB; lower case too):
// "4096", "64K", "500M", "2G". nullopt for anything else (a sign, a fraction, "2GB", overflow).
std::optional<uint64_t> parsePchCacheSize(llvm::StringRef text);

// The start of the name of a temporary that process `pid` of this machine writes a PCH to:
// "<key>.pch.<host>.<pid>." (the host: its name, characters other than letters, digits and '-' as
// '-'); the writer adds 16 random hex digits and ".tmp".
std::string pchTemporaryPrefix(const std::string &key, long pid);

// Removes the temporaries in `dir` whose writer is dead (DeadWriter.h, the rule every temporary of
// acc-migrate follows): named for a pid of this machine that no process has (or by the versions
// before this one: <key>.pch.tmp<pid>, and clang's own temporary <key>.pch-<8 hex>.tmp<pid>.tmp), or
// older than a day, whoever wrote them (a PCH is written in seconds; another machine sharing the
// directory cannot be asked about its pids). DeadWriter.h says why a pid in the name rather than an
// flock, and what the rule cannot tell.
void removeDeadPchTemporaries(const std::string &dir);

// Removes the least recently used PCHs (oldest mtime first) of `dir` until their total size is at
// most `limitBytes`, never one of `keep` (paths, or file names). Only <32 hex>.pch files count.
void trimPchCache(const std::string &dir, uint64_t limitBytes, const std::set<std::string> &keep);

}  // namespace accmigrate

// A precompiled header of <torch/torch.h> per set of compiler flags, kept across runs in a cache
// directory. Parsing torch's headers is most of the time spent on every file (15-20 s here);
// loading them from a PCH built with -fpch-instantiate-templates takes a fraction of that.
#pragma once
#include <clang/Tooling/CompilationDatabase.h>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace accmigrate {

class PchCache {
 public:
  // `extraArgs` are the user's `-- <args>`: they change the parse, so they are part of the key.
  PchCache(std::string dir, std::vector<std::string> extraArgs);

  // The PCH for files compiled with `command` (built now when the cache has none), or "" when the
  // flags cannot compile <torch/torch.h>: such files are parsed without one.
  std::string pchFor(const clang::tooling::CompileCommand &command);

  // Forgets a PCH that clang refused to load (torch's headers changed since it was built); the next
  // file with the same flags builds a fresh one.
  void discard(const std::string &pch);

  const std::string &dir() const { return dir_; }

 private:
  std::string build(const clang::tooling::CompileCommand &command, const std::string &key);

  std::string dir_;
  std::vector<std::string> extraArgs_;
  std::mutex mutex_;  // one build at a time; the other threads wait for it rather than duplicate it
  std::map<std::string, std::string> known_;  // key -> PCH path, "" when it cannot be built
};

// The default cache: $ACC_MIGRATE_CACHE, else ~/.cache/acc/migrate-pch.
std::string defaultPchCacheDir();

}  // namespace accmigrate

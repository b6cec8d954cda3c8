#include "scratch_dir.h"

#include <ftw.h>
#include <sys/stat.h>
#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace acc::testing {

ScratchDir::ScratchDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base ? base : "/tmp") + "/acc_test_XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

ScratchDir::~ScratchDir() {
  // Not std::filesystem::remove_all: libtorch.so exports a copy of it that crashes here.
  ::nftw(path_.c_str(), [](const char* entry, const struct stat*, int, struct FTW*) { return ::remove(entry); },
         16, FTW_DEPTH | FTW_PHYS);
}

}  // namespace acc::testing

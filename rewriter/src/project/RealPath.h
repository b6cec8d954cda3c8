// Paths compared as the file system resolves them (symbolic links, "..").
#pragma once
#include <llvm/ADT/SmallString.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/FileSystem.h>
#include <string>

namespace accmigrate {

// The real path of `p`, or `p` as given where it does not resolve (it does not exist yet, or cannot
// be read): a comparison of two such paths then fails rather than the caller.
inline std::string realPathOr(llvm::StringRef p) {
  llvm::SmallString<256> real;
  return llvm::sys::fs::real_path(p, real) ? p.str() : std::string(real);
}

}  // namespace accmigrate

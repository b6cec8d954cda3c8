// A word of a command line the user can copy into a POSIX shell.
#pragma once
#include <llvm/ADT/StringRef.h>
#include <string>

namespace accmigrate {

// `word` as is when the shell reads it unchanged (paths, -Dname=value, <placeholders> aside), else
// in single quotes.
inline std::string shellQuote(llvm::StringRef word) {
  bool plain = !word.empty() && word.find_first_not_of(
                                    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                    "0123456789_./=:+,@%-") == llvm::StringRef::npos;
  if (plain) return word.str();
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace accmigrate

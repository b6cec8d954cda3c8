// A unified diff (the format of `diff -u` and `git diff`) between two versions of a file.
#pragma once
#include <string>

namespace accmigrate {

// `label` names the file in the ---/+++ header as a/<label> and b/<label> (`git apply` reads it);
// `color` adds ANSI colours for a terminal. Empty when the texts are equal.
std::string unifiedDiff(const std::string &label, const std::string &before, const std::string &after,
                        bool color, unsigned context = 3);

}  // namespace accmigrate

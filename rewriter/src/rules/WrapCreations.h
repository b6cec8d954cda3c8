// Shared by optimizer-declaration and scheduler-declaration: every place that creates an object of a
// class derived from `base` spells `wrapper<T>` instead of `T`, so the object gets acc's step().
#pragma once
#include <llvm/ADT/StringRef.h>

namespace accmigrate {
class Migration;
void wrapCreations(Migration &m, llvm::StringRef base, llvm::StringRef wrapper);
}  // namespace accmigrate

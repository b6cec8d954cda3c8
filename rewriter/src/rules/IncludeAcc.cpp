// include-acc: `#include <acc/acc.h>` once in every file that now uses the acc API, right after its
// last `#include <torch/...>`, never after one of the project's own (quoted) includes: a project
// header may `#define` what acc's headers use (one progress-bar header does `#define constexpr`).
// Without a torch include, before the first project include, else after the leading includes (or
// the `#pragma once`). Only includes outside `#if` blocks (an include guard aside) are places.
#include "engine/Migration.h"

#include <clang/Basic/SourceManager.h>

using namespace clang;

namespace accmigrate {

// The line after `pos` that is not blank.
static StringRef nextLine(StringRef buffer, size_t pos) {
  for (; pos < buffer.size(); ++pos) {
    size_t end = buffer.find('\n', pos);
    if (end == StringRef::npos) end = buffer.size();
    StringRef line = buffer.slice(pos, end).trim();
    if (!line.empty()) return line;
    pos = end;
  }
  return "";
}

// Where acc.h goes in `buffer`, or npos when the file includes it already.
static size_t includePosition(StringRef buffer) {
  size_t afterLeading = 0, afterTorch = StringRef::npos, beforeProject = StringRef::npos, blockStart = 0;
  int depth = 0, guardDepth = 0;
  bool firstDirective = true;
  // Scan the leading preprocessor block: includes, guards, comments, blank lines.
  for (size_t pos = 0; pos < buffer.size();) {
    size_t end = buffer.find('\n', pos);
    if (end == StringRef::npos) end = buffer.size();
    size_t next = std::min(end + 1, buffer.size());
    StringRef line = buffer.slice(pos, end).trim();
    if (line.startswith("#if")) {
      // An include guard (#ifndef X, #define X first) is not a conditional block.
      if (firstDirective && line.startswith("#ifndef") && nextLine(buffer, next).startswith("#define"))
        guardDepth = 1;
      else if (depth == guardDepth)
        blockStart = pos;
      ++depth;
    } else if (line.startswith("#endif")) {
      --depth;
    }
    if (line.startswith("#")) firstDirective = false;
    bool outsideBlocks = depth <= guardDepth;
    bool include = line.startswith("#include");
    if (include || line.startswith("#pragma once") || line.startswith("#define") || line.startswith("#endif")) {
      if (line.contains("acc/acc.h")) return StringRef::npos;
      if (outsideBlocks) afterLeading = next;
      if (include && line.contains('"') && beforeProject == StringRef::npos)
        beforeProject = outsideBlocks ? pos : blockStart;  // in a block: before the block
      if (include && outsideBlocks && line.contains("<torch/") && beforeProject == StringRef::npos)
        afterTorch = next;
    } else if (!(line.empty() || line.startswith("//") || line.startswith("/*") || line.startswith("*") ||
                 line.startswith("#"))) {
      break;
    }
    pos = end + 1;
  }
  if (afterTorch != StringRef::npos) return afterTorch;
  return std::min(afterLeading, beforeProject);
}

static void applyIncludeAcc(Migration &m) {
  for (FileID file : m.filesUsingAcc()) {
    StringRef buffer = m.sm.getBufferData(file);
    size_t insertAt = includePosition(buffer);
    if (insertAt == StringRef::npos) continue;
    SourceLocation at = m.sm.getLocForStartOfFile(file).getLocWithOffset(insertAt);
    std::string text = "#include <acc/acc.h>\n";
    if (insertAt > 0 && buffer[insertAt - 1] != '\n') text = "\n" + text;  // last line had no newline
    m.insert(at, text);
  }
}

void registerIncludeAcc(Migration &m) { m.atEnd([&m] { applyIncludeAcc(m); }); }

}  // namespace accmigrate

// include-acc: `#include <acc/acc.h>` once in every file that now uses the acc API, after its last
// include (or its `#pragma once`), never twice.
#include "Migration.h"

#include <clang/Basic/SourceManager.h>

using namespace clang;

namespace accmigrate {

static void applyIncludeAcc(Migration &m) {
  for (FileID file : m.filesUsingAcc()) {
    StringRef buffer = m.sm.getBufferData(file);
    size_t insertAt = 0;
    bool included = false;
    // Scan the leading preprocessor block: includes, guards, comments, blank lines.
    for (size_t pos = 0; pos < buffer.size();) {
      size_t end = buffer.find('\n', pos);
      if (end == StringRef::npos) end = buffer.size();
      StringRef line = buffer.slice(pos, end).trim();
      if (line.startswith("#include") || line.startswith("#pragma once") ||
          line.startswith("#ifndef") || line.startswith("#define")) {
        included |= line.contains("acc/acc.h");
        if (!line.startswith("#ifndef")) insertAt = std::min(end + 1, buffer.size());
      } else if (!(line.empty() || line.startswith("//") || line.startswith("/*") || line.startswith("*") ||
                   line.startswith("#"))) {
        break;
      }
      pos = end + 1;
    }
    if (included) continue;
    SourceLocation at = m.sm.getLocForStartOfFile(file).getLocWithOffset(insertAt);
    std::string text = "#include <acc/acc.h>\n";
    if (insertAt > 0 && buffer[insertAt - 1] != '\n') text = "\n" + text;  // last line had no newline
    m.insert(at, text);
  }
}

void registerIncludeAcc(Migration &m) { m.atEnd([&m] { applyIncludeAcc(m); }); }

}  // namespace accmigrate

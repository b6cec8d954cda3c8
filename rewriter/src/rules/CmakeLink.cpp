// cmake-link (report): the CMake target that builds a migrated file must link acc. For each file that
// now uses acc, the nearest CMakeLists.txt above it whose add_executable/add_library lists the file
// gets a finding at that line: add `find_package(acc CONFIG REQUIRED)` and link `acc::acc`. A
// CMakeLists.txt that already names acc::acc is left alone. (Other build systems: see docs/migrate.md,
// `pkg-config --cflags --libs acc`.) Reported rather than edited: build files are the project's own
// language, with variables, generator expressions and target lists acc-migrate does not evaluate.
#include "Migration.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>
#include <algorithm>
#include <regex>
#include <sstream>

using namespace clang;
namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;

namespace accmigrate {
namespace {

struct Target {
  std::string name;
  unsigned line = 0, column = 0;
};

// The target in `cmake` (text) whose source list names `file`, if any.
bool findTarget(llvm::StringRef cmake, llvm::StringRef file, Target &out) {
  static const std::regex command(R"((add_executable|add_library)\s*\(([^)]*)\))", std::regex::icase);
  std::string text = cmake.str();
  for (std::sregex_iterator it(text.begin(), text.end(), command), end; it != end; ++it) {
    std::istringstream args((*it)[2].str());
    std::string name, word;
    args >> name;
    while (args >> word)
      if (path::filename(word) == path::filename(file)) {
        out.name = name;
        size_t offset = it->position(0);
        out.line = 1 + std::count(text.begin(), text.begin() + offset, '\n');
        size_t lineStart = text.find_last_of('\n', offset == 0 ? 0 : offset - 1);
        out.column = offset == 0 || lineStart == std::string::npos ? offset + 1 : offset - lineStart;
        return true;
      }
  }
  return false;
}

}  // namespace

static void applyCmakeLink(Migration &m) {
  for (FileID id : m.filesUsingAcc()) {
    OptionalFileEntryRef entry = m.sm.getFileEntryRefForID(id);
    if (!entry || id != m.sm.getMainFileID()) continue;  // headers are built by the sources that include them
    llvm::SmallString<256> dir(entry->getName());
    fs::make_absolute(dir);
    std::string file = dir.str().str();
    for (path::remove_filename(dir); !dir.empty(); dir = path::parent_path(dir)) {
      llvm::SmallString<256> cmakePath(dir);
      path::append(cmakePath, "CMakeLists.txt");
      auto buffer = llvm::MemoryBuffer::getFile(cmakePath);
      Target target;
      if (buffer && findTarget((*buffer)->getBuffer(), file, target)) {
        if ((*buffer)->getBuffer().contains("acc::acc")) break;
        // The finding points into CMakeLists.txt: give the SourceManager that file so it has a location.
        auto cmakeEntry = m.ctx.getSourceManager().getFileManager().getFileRef(cmakePath);
        if (!cmakeEntry) break;
        FileID cmakeId = m.ctx.getSourceManager().getOrCreateFileID(&cmakeEntry->getFileEntry(), SrcMgr::C_User);
        m.report(m.sm.translateLineCol(cmakeId, target.line, target.column),
                 "target `" + target.name + "` builds code that now uses acc",
                 "add `find_package(acc CONFIG REQUIRED)` and `target_link_libraries(" + target.name +
                     " PRIVATE acc::acc)`",
                 Finding::Level::Note);
        break;
      }
      if (fs::exists(dir + "/.git")) break;  // the top of the project
    }
  }
}

void registerCmakeLink(Migration &m) { m.atEnd([&m] { applyCmakeLink(m); }); }

}  // namespace accmigrate

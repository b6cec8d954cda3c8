// cmake-link: the CMake targets that build a migrated file must link acc. For each source whose unit
// now uses acc (itself or a header it includes), the project's top CMakeLists.txt (CMakeProject.h)
// gets `find_package(acc CONFIG REQUIRED)` once, after find_package(Torch) or else after project(),
// and every target that lists the source gets `acc::acc`: appended to its last target_link_libraries
// (keeping that call's signature, which CMake forbids mixing), or in a new
// `target_link_libraries(T PRIVATE acc::acc)` after the target's definition. These are edits of build
// files outside the parsed unit, often outside the given scope (src/ beside CMakeLists.txt): only
// build files are edited there. A target defined in a function()/macro() or named through what the
// tool cannot know is reported with the lines to add; so is a source with no CMakeLists.txt above it
// (`pkg-config --cflags --libs acc`). Nothing when acc is already found and linked.
#include "engine/Migration.h"
#include "project/CMakeProject.h"

#include <llvm/Support/FileSystem.h>
#include <algorithm>

using namespace clang;

namespace accmigrate {
namespace {

bool isCommand(const cmake::Command &command, llvm::StringRef name, llvm::StringRef first) {
  return command.name == name && !command.args.empty() && llvm::StringRef(command.args[0].text).equals_insensitive(first);
}

// The whitespace that starts the line holding `offset`: inserted lines line up with their neighbour.
std::string indentAt(llvm::StringRef text, unsigned offset) {
  size_t lineStart = text.take_front(offset).rfind('\n');
  lineStart = lineStart == llvm::StringRef::npos ? 0 : lineStart + 1;
  return text.slice(lineStart, offset).take_while([](char c) { return c == ' ' || c == '\t'; }).str();
}

Edit insertion(const cmake::ListsFile &file, unsigned offset, const std::string &text) {
  Edit edit;
  edit.file = file.path;
  edit.offset = offset;
  edit.text = text;
  llvm::StringRef before = llvm::StringRef(file.text).take_front(offset);
  edit.line = 1 + before.count('\n');
  size_t lineStart = before.rfind('\n');
  edit.column = lineStart == llvm::StringRef::npos ? offset + 1 : offset - lineStart;
  return edit;
}

// An edit adding a line after `command`.
Edit lineAfter(const cmake::ListsFile &file, const cmake::Command &command, const std::string &line) {
  return insertion(file, command.end, "\n" + indentAt(file.text, command.begin) + line);
}

// Where find_package(acc) goes: after find_package(Torch), else after the top's project(); `in` is its file.
const cmake::Command *findPackageAnchor(const cmake::Project &project, const cmake::ListsFile *&in) {
  for (const cmake::ListsFile &file : project.files())
    for (const cmake::Command &command : file.commands)
      if (!command.inFunction && isCommand(command, "find_package", "Torch")) {
        in = &file;
        return &command;
      }
  in = project.file(project.top + "/CMakeLists.txt");
  if (!in) return nullptr;
  for (const cmake::Command &command : in->commands)
    if (!command.inFunction && command.name == "project") return &command;
  return nullptr;
}

bool linksAcc(const cmake::Target &target) {
  for (const auto &[file, call] : target.linkCalls)
    for (const cmake::Argument &arg : call->args)
      if (arg.text == "acc::acc") return true;
  return false;
}

void applyCmakeLink(Migration &m) {
  if (m.filesUsingAcc().empty()) return;  // a header's use counts: its includer's targets build it
  OptionalFileEntryRef mainEntry = m.sm.getFileEntryRefForID(m.sm.getMainFileID());
  if (!mainEntry) return;
  std::string mainFile = absoluteInUnit(m.sm, mainEntry->getName());
  if (!llvm::sys::fs::exists(mainFile)) return;  // an in-memory unit has no build
  std::optional<cmake::Project> found = cmake::Project::enclosing(std::string(mainFile));
  if (!found) {
    m.reportInFile({std::string(mainFile), 1, 1, "", "this file now uses acc and no CMakeLists.txt is above it",
                    "link acc with the flags of `pkg-config --cflags --libs acc`", Finding::Level::Note});
    return;
  }
  const cmake::Project &project = *found;
  const std::string &top = project.top;
  std::vector<const cmake::Target *> targets = project.targetsOf(std::string(mainFile));
  if (targets.empty()) {
    // Never a silent skip: the target may come from a foreach, file(GLOB) or the project's function.
    m.reportInFile({std::string(mainFile), 1, 1, "",
                    "this file now uses acc, and no target of the CMake project in " + top +
                        " lists it where acc-migrate can read it (add_executable, add_library, target_sources; "
                        "not foreach, file(GLOB) or the project's own functions)",
                    "add `find_package(acc CONFIG REQUIRED)` to " + top +
                        "/CMakeLists.txt and `acc::acc` to the target_link_libraries of the target that builds it",
                    Finding::Level::Note});
    return;
  }
  bool foundAcc = std::any_of(project.files().begin(), project.files().end(), [](const cmake::ListsFile &file) {
    return std::any_of(file.commands.begin(), file.commands.end(),
                       [](const cmake::Command &c) { return isCommand(c, "find_package", "acc"); });
  });
  const cmake::ListsFile *anchorFile = nullptr;
  const cmake::Command *anchor = findPackageAnchor(project, anchorFile);
  bool findPackageEdited = false;
  for (const cmake::Target *target : targets) {
    if (linksAcc(*target) || !target->resolved) continue;
    if (!foundAcc && anchor) {
      m.editFile(lineAfter(*anchorFile, *anchor, "find_package(acc CONFIG REQUIRED)"));
      findPackageEdited = true;
    }
    const cmake::ListsFile *file = project.file(target->listsFile);
    if (!target->linkCalls.empty()) {
      const auto &[callFile, call] = target->linkCalls.back();
      m.editFile(insertion(*project.file(callFile), call->args.back().end, " acc::acc"));
    } else {
      m.editFile(lineAfter(*file, *target->definition, "target_link_libraries(" + target->name + " PRIVATE acc::acc)"));
    }
  }
  for (const cmake::Target *target : targets) {
    if (linksAcc(*target) || target->resolved) continue;
    std::string lines = "`target_link_libraries(" + target->name + " PRIVATE acc::acc)`";
    if (!foundAcc && !findPackageEdited) lines = "`find_package(acc CONFIG REQUIRED)` and " + lines;
    m.reportInFile({target->listsFile, target->definition->line, target->definition->column, "",
                    "target `" + target->name + "` builds code that now uses acc; it is defined " +
                        (target->definition->inFunction ? "in a function or macro"
                                                        : "through variables or generator expressions") +
                        ", which acc-migrate does not edit",
                    "add " + lines, Finding::Level::Note});
  }
}

}  // namespace

void registerCmakeLink(Migration &m) { m.atEnd([&m] { applyCmakeLink(m); }); }

}  // namespace accmigrate

// Reading a CMake project well enough to know which targets build a source file and where to add a
// link to acc: CMake's command syntax (with byte offsets, for edits) and the resolution of targets
// to the files they list, through add_subdirectory, target_sources and set() variables. No CMake
// code is evaluated beyond that: what depends on the configuration (generator expressions, cache
// variables, function arguments) is marked unresolved so callers report instead of editing.
#pragma once
#include <llvm/ADT/StringRef.h>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace accmigrate::cmake {

struct Argument {
  std::string text;             // as written, without quotes or brackets
  unsigned begin = 0, end = 0;  // offsets of the argument as written (quotes included)
  bool quoted = false;          // "..." or [[...]]: never split into a list
};

struct Command {
  std::string name;               // lower case: CMake command names are case-insensitive
  unsigned begin = 0, end = 0;    // from the name to after `)`
  unsigned line = 1, column = 1;  // of the name
  std::vector<Argument> args;
  bool inFunction = false;  // in a function()/macro() body: runs only when called, with its arguments
};

// The commands of a CMakeLists.txt (comments, quoted and bracket arguments handled). Text that does
// not lex as a command is skipped.
std::vector<Command> parseCommands(llvm::StringRef text);

struct Target {
  std::string name;
  std::string listsFile;  // the CMakeLists.txt that defines it
  const Command *definition = nullptr;
  bool resolved =
      true;  // false: defined in a function/macro, or its name or sources depend on variables it cannot know
  std::vector<std::string> sources;  // absolute, dots removed
  // Its target_link_libraries calls outside functions, in the order CMake runs them: (file, call).
  std::vector<std::pair<std::string, const Command *>> linkCalls;
};

struct ListsFile {
  std::string path;
  std::string text;
  std::vector<Command> commands;
};

class Project {
 public:
  // The project whose top CMakeLists.txt is in `topDir`; reads it and the directories it adds.
  static Project load(const std::string &topDir);

  // The project that builds `file`, read once: the topmost CMakeLists.txt calling project() above it
  // (walking up to the first directory holding .git, never into or above a build tree's
  // CMakeCache.txt) whose add_subdirectory tree reaches the CMakeLists.txt nearest `file`, else the
  // nearest one calling project(); nullopt when there is none.
  static std::optional<Project> enclosing(const std::string &file);

  // Targets that list `file` (absolute), compared by full path.
  std::vector<const Target *> targetsOf(const std::string &file) const;

  const std::vector<ListsFile> &files() const { return files_; }
  const std::vector<Target> &targets() const { return targets_; }
  const ListsFile *file(const std::string &path) const;
  std::string top;

 private:
  void readDirectory(const std::string &dir, std::map<std::string, std::string> vars, int depth);
  std::vector<ListsFile> files_;  // a Command keeps its address: each file's vector is moved, never copied
  std::vector<Target> targets_;
};

}  // namespace accmigrate::cmake

#include "project/CMakeProject.h"

#include "project/RealPath.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>
#include <algorithm>
#include <set>

namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;

namespace accmigrate::cmake {
namespace {

// Lexes CMake's command invocations: `name(args)`, args unquoted, "quoted" or [=[bracket]=], `#`
// line comments and #[[bracket comments]].
class Lexer {
 public:
  explicit Lexer(llvm::StringRef text) : text_(text) {}

  std::vector<Command> commands() {
    std::vector<Command> out;
    int functionDepth = 0;
    while (skipSpaceAndComments(), pos_ < text_.size()) {
      if (!isIdentifierStart(text_[pos_])) {
        ++pos_;  // not a command: resynchronise on the next identifier
        continue;
      }
      Command command;
      command.begin = pos_;
      position(pos_, command.line, command.column);
      while (pos_ < text_.size() && isIdentifierChar(text_[pos_])) ++pos_;
      command.name = text_.slice(command.begin, pos_).lower();
      while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
      if (pos_ >= text_.size() || text_[pos_] != '(') continue;
      ++pos_;
      if (!arguments(command.args)) break;  // unterminated: nothing after it is a command
      command.end = pos_;
      if (command.name == "endfunction" || command.name == "endmacro") functionDepth = std::max(0, functionDepth - 1);
      command.inFunction = functionDepth > 0;
      if (command.name == "function" || command.name == "macro") ++functionDepth;
      out.push_back(std::move(command));
    }
    return out;
  }

 private:
  static bool isIdentifierStart(char c) { return llvm::isAlpha(c) || c == '_'; }
  static bool isIdentifierChar(char c) { return llvm::isAlnum(c) || c == '_'; }

  void position(size_t offset, unsigned &line, unsigned &column) const {
    llvm::StringRef before = text_.take_front(offset);
    line = 1 + before.count('\n');
    size_t lineStart = before.rfind('\n');
    column = lineStart == llvm::StringRef::npos ? offset + 1 : offset - lineStart;
  }

  // At `[`: the length of a bracket opening `[==[` (its `=` count in `equals`), 0 if it is not one.
  size_t bracketOpen(size_t at, size_t &equals) const {
    if (at >= text_.size() || text_[at] != '[') return 0;
    size_t p = at + 1;
    while (p < text_.size() && text_[p] == '=') ++p;
    if (p >= text_.size() || text_[p] != '[') return 0;
    equals = p - at - 1;
    return p + 1 - at;
  }

  // Past the bracket content opened at `pos_` (the opening already measured); false if unterminated.
  bool skipBracket(size_t equals, std::string *content) {
    std::string close = "]" + std::string(equals, '=') + "]";
    size_t found = text_.find(close, pos_);
    if (found == llvm::StringRef::npos) return false;
    if (content) *content = text_.slice(pos_, found).str();
    pos_ = found + close.size();
    return true;
  }

  void skipSpaceAndComments() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        ++pos_;
      } else if (c == '#') {
        size_t equals;
        if (size_t open = bracketOpen(pos_ + 1, equals)) {
          pos_ += 1 + open;
          if (!skipBracket(equals, nullptr)) pos_ = text_.size();
        } else {
          size_t eol = text_.find('\n', pos_);
          pos_ = eol == llvm::StringRef::npos ? text_.size() : eol;
        }
      } else {
        return;
      }
    }
  }

  // After `(`: the arguments up to the matching `)`. Nested parentheses are arguments of their own, as
  // in CMake (`if((A) OR B)`).
  bool arguments(std::vector<Argument> &args) {
    int depth = 1;
    while (skipSpaceAndComments(), pos_ < text_.size()) {
      char c = text_[pos_];
      Argument arg;
      arg.begin = pos_;
      size_t equals;
      if (c == '(' || c == ')') {
        ++pos_;
        if (c == ')' && --depth == 0) return true;
        if (c == '(') ++depth;
        continue;
      }
      if (c == '"') {
        arg.quoted = true;
        ++pos_;
        while (pos_ < text_.size() && text_[pos_] != '"') {
          if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) arg.text += text_[pos_++];
          arg.text += text_[pos_++];
        }
        if (pos_ >= text_.size()) return false;
        ++pos_;
      } else if (size_t open = bracketOpen(pos_, equals)) {
        arg.quoted = true;
        pos_ += open;
        if (!skipBracket(equals, &arg.text)) return false;
      } else {
        // Unquoted: up to space, parenthesis or comment.
        while (pos_ < text_.size()) {
          char d = text_[pos_];
          if (d == ' ' || d == '\t' || d == '\r' || d == '\n' || d == '(' || d == ')' || d == '#') break;
          if (d == '\\' && pos_ + 1 < text_.size()) arg.text += text_[pos_++];
          arg.text += text_[pos_++];
        }
      }
      arg.end = pos_;
      args.push_back(std::move(arg));
    }
    return false;
  }

  llvm::StringRef text_;
  size_t pos_ = 0;
};

using Variables = std::map<std::string, std::string>;

// `text` with ${VAR} replaced; nullopt when it depends on what this reading cannot know (an unset
// variable, $ENV{}, a generator expression).
std::optional<std::string> expand(const std::string &text, const Variables &vars) {
  if (text.find("$<") != std::string::npos || text.find("$ENV{") != std::string::npos) return std::nullopt;
  std::string out = text;
  for (size_t open; (open = out.rfind("${")) != std::string::npos;) {  // innermost first
    size_t close = out.find('}', open);
    if (close == std::string::npos) return std::nullopt;
    auto value = vars.find(out.substr(open + 2, close - open - 2));
    if (value == vars.end()) return std::nullopt;
    out.replace(open, close - open + 1, value->second);
  }
  return out;
}

// The values of `args` (from index `first`), expanded and split into lists as CMake does for
// unquoted arguments; `resolved` turns false when one cannot be known.
std::vector<std::string> values(const std::vector<Argument> &args, size_t first, const Variables &vars,
                                bool &resolved) {
  std::vector<std::string> out;
  for (size_t i = first; i < args.size(); ++i) {
    std::optional<std::string> value = expand(args[i].text, vars);
    if (!value) {
      resolved = false;
      continue;
    }
    if (args[i].quoted) {
      out.push_back(*value);
      continue;
    }
    llvm::SmallVector<llvm::StringRef, 8> items;
    llvm::StringRef(*value).split(items, ';', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef item : items) out.push_back(item.str());
  }
  return out;
}

std::string normalise(llvm::StringRef file, llvm::StringRef dir) {
  llvm::SmallString<256> result(file);
  if (!path::is_absolute(result)) {
    result = dir;
    path::append(result, file);
  }
  path::remove_dots(result, /*remove_dot_dot=*/true);
  return realPathOr(result);
}

bool callsProject(const std::string &listsFile) {
  auto buffer = llvm::MemoryBuffer::getFile(listsFile);
  if (!buffer) return false;
  for (const Command &command : parseCommands((*buffer)->getBuffer()))
    if (command.name == "project" && !command.inFunction) return true;
  return false;
}

const std::set<std::string> &targetKeywords() {
  static const std::set<std::string> keywords = {
      "WIN32",   "MACOSX_BUNDLE", "EXCLUDE_FROM_ALL", "STATIC", "SHARED",    "MODULE", "OBJECT",  "INTERFACE",
      "PRIVATE", "PUBLIC",        "FILE_SET",         "TYPE",   "BASE_DIRS", "FILES",  "HEADERS", "CXX_MODULES"};
  return keywords;
}

}  // namespace

std::vector<Command> parseCommands(llvm::StringRef text) { return Lexer(text).commands(); }

std::optional<Project> Project::enclosing(const std::string &file) {
  // Candidates: every directory above `file` whose CMakeLists.txt calls project(), nearest first.
  std::vector<std::string> candidates;
  std::string nearest;  // the CMakeLists.txt closest to the file
  llvm::SmallString<256> dir(file);
  fs::make_absolute(dir);
  for (path::remove_filename(dir); !dir.empty(); dir = path::parent_path(dir)) {
    // A build tree (generated or scratch files) is not built by the CMakeLists.txt above it.
    if (fs::exists(dir + "/CMakeCache.txt")) break;
    std::string lists = (dir + "/CMakeLists.txt").str();
    if (nearest.empty() && fs::exists(lists)) nearest = normalise(lists, "");
    if (callsProject(lists)) candidates.push_back(std::string(dir));
    if (fs::exists(dir + "/.git") || path::parent_path(dir) == dir) break;
  }
  // The topmost one whose add_subdirectory tree reaches that CMakeLists.txt: a project that merely
  // lies inside another's folder (an example, a test's scratch copy in a build tree) is its own top.
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    Project project = load(*it);
    if (std::next(it) == candidates.rend() || project.file(nearest)) return project;
  }
  return std::nullopt;
}

Project Project::load(const std::string &topDir) {
  Project project;
  project.top = normalise(topDir, "");
  Variables vars = {{"CMAKE_SOURCE_DIR", project.top}, {"PROJECT_SOURCE_DIR", project.top}};
  project.readDirectory(project.top, vars, 0);
  return project;
}

void Project::readDirectory(const std::string &dir, Variables vars, int depth) {
  if (depth > 32) return;  // a cycle through symbolic links
  std::string listsPath = dir + "/CMakeLists.txt";
  auto buffer = llvm::MemoryBuffer::getFile(listsPath);
  if (!buffer) return;
  size_t index = files_.size();
  files_.push_back({listsPath, (*buffer)->getBuffer().str(), {}});
  files_[index].commands = parseCommands(files_[index].text);
  vars["CMAKE_CURRENT_SOURCE_DIR"] = vars["CMAKE_CURRENT_LIST_DIR"] = dir;

  auto findTarget = [&](const std::string &name) -> Target * {
    for (Target &target : targets_)
      if (target.name == name) return &target;
    return nullptr;
  };
  auto addSources = [&](Target &target, const std::vector<std::string> &items) {
    for (const std::string &item : items)
      if (!targetKeywords().count(item)) target.sources.push_back(normalise(item, dir));
  };
  // Commands by index: reading a subdirectory appends to files_, which moves this file's entry.
  for (size_t i = 0; i < files_[index].commands.size(); ++i) {
    const Command &command = files_[index].commands[i];
    const std::vector<Argument> &args = command.args;
    if (args.empty()) continue;
    bool resolved = !command.inFunction;
    std::optional<std::string> first = expand(args[0].text, vars);
    if (command.name == "set" && resolved && first) {
      // set(VAR value... [CACHE TYPE doc] | [PARENT_SCOPE]): the value, never the cache's metadata.
      size_t end = args.size();
      for (size_t a = 1; a < args.size(); ++a)
        if (args[a].text == "CACHE" || args[a].text == "PARENT_SCOPE") end = a;
      std::vector<Argument> valueArgs(args.begin(), args.begin() + end);
      bool known = true;
      std::vector<std::string> items = values(valueArgs, 1, vars, known);
      if (known)
        vars[*first] = llvm::join(items, ";");
      else
        vars.erase(*first);
    } else if (command.name == "list" && resolved && args.size() > 1 && args[0].text == "APPEND") {
      if (std::optional<std::string> name = expand(args[1].text, vars)) {
        bool known = true;
        std::vector<std::string> items = values(args, 2, vars, known);
        std::string &value = vars[*name];
        if (!value.empty() && !items.empty()) value += ";";
        value += llvm::join(items, ";");
      }
    } else if (command.name == "project" && resolved) {
      vars["PROJECT_SOURCE_DIR"] = dir;
      if (first) vars[*first + "_SOURCE_DIR"] = dir;
    } else if (command.name == "add_subdirectory" && resolved && first) {
      readDirectory(normalise(*first, dir), vars, depth + 1);
    } else if (command.name == "add_executable" || command.name == "add_library") {
      bool special = std::any_of(args.begin(), args.end(),
                                 [](const Argument &a) { return a.text == "IMPORTED" || a.text == "ALIAS"; });
      if (special) continue;
      Target target;
      target.name = first ? *first : args[0].text;
      target.listsFile = listsPath;
      target.definition = &command;
      target.resolved = resolved && first.has_value();
      bool known = true;  // a source behind a generator expression is not this file: the target stays
      addSources(target, values(args, 1, vars, known));
      targets_.push_back(std::move(target));
    } else if (command.name == "target_sources" && first) {
      if (Target *target = findTarget(*first)) {
        bool known = true;
        addSources(*target, values(args, 1, vars, known));
      }
    } else if (command.name == "target_link_libraries" && resolved && first) {
      if (Target *target = findTarget(*first)) target->linkCalls.emplace_back(listsPath, &command);
    }
  }
}

std::vector<const Target *> Project::targetsOf(const std::string &file) const {
  std::string wanted = normalise(file, "");
  std::vector<const Target *> out;
  for (const Target &target : targets_)
    if (std::find(target.sources.begin(), target.sources.end(), wanted) != target.sources.end()) out.push_back(&target);
  return out;
}

const ListsFile *Project::file(const std::string &listsPath) const {
  for (const ListsFile &f : files_)
    if (f.path == listsPath) return &f;
  return nullptr;
}

}  // namespace accmigrate::cmake

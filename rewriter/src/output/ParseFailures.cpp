#include "output/ParseFailures.h"

#include "project/ShellQuote.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/Regex.h>
#include <map>
#include <regex>

namespace path = llvm::sys::path;

namespace accmigrate {
namespace {

// The text without // and /* */ comments (a commented-out backward() is not training code).
std::string withoutComments(llvm::StringRef text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.substr(i).startswith("//")) {
      i = std::min(text.find('\n', i), text.size()) - 1;
      continue;
    }
    if (text.substr(i).startswith("/*")) {
      size_t end = text.find("*/", i + 2);
      i = end == llvm::StringRef::npos ? text.size() : end + 1;
      out += ' ';
      continue;
    }
    out += text[i];
  }
  return out;
}

// "Eigen3" and "Eigen/Core" both give "eigen"; "opencv2/core.hpp" and "OpenCV" give "opencv".
std::string stem(llvm::StringRef name) {
  name = name.take_until([](char c) { return c == '/'; });
  name = name.take_until([](char c) { return c == '.'; });
  return name.rtrim("0123456789_-").lower();
}

// Of the project's find_package calls that found nothing, the one that most likely provides
// `header`: the only one, or the only one named like the header's first component.
const MissedPackage *likelyProvider(const std::vector<MissedPackage> &missed, llvm::StringRef header) {
  if (missed.size() == 1) return &missed.front();
  std::string want = stem(header);
  const MissedPackage *found = nullptr;
  for (const MissedPackage &m : missed) {
    std::string have = stem(m.name);
    if (std::min(want.size(), have.size()) < 3) continue;
    if (llvm::StringRef(want).startswith(have) || llvm::StringRef(have).startswith(want)) {
      if (found) return nullptr;  // two fit: naming one would be a guess
      found = &m;
    }
  }
  return found;
}

std::string commandWords(const std::vector<std::string> &words) {
  std::string line;
  for (const std::string &word : words) line += (line.empty() ? "" : " ") + shellQuote(word);
  return line;
}

// With which flags the file was parsed, as the rest of a sentence.
std::string flagsUsed(const CompileFlags &flags, const std::string &file, const DisplayPath &display) {
  std::string top = display(flags.projectTop);
  bool listed = flags.databaseFiles.count(file) > 0;
  switch (flags.origin) {
    case CompileFlags::Origin::Configured:
      if (!listed)
        return "with inferred flags (acc-migrate's configure of the CMake project " + top + " does not list it)";
      return "with the flags of acc-migrate's configure of the CMake project " + top +
             (flags.carried.empty() ? std::string()
                                    : ", which had the package locations of " + display(flags.userBuildDir));
    case CompileFlags::Origin::Database:
      if (!listed)
        return "with inferred flags (" + display(flags.databaseDir) + "/compile_commands.json does not list it)";
      return "with the flags of " + display(flags.databaseDir) + "/compile_commands.json";
    case CompileFlags::Origin::Inferred:
      if (!flags.configureError.empty())
        return "with inferred flags, since acc-migrate's configure of the CMake project " + top +
               " failed: " + flags.configureError;
      break;
  }
  return "with inferred flags (no compile_commands.json, and no CMake project that builds it was configured)";
}

}  // namespace

std::vector<std::string> trainingCodeIn(llvm::StringRef text) {
  std::string code = withoutComments(text);
  static const std::pair<std::regex, const char *> kinds[] = {
      {std::regex(R"(\bbackward\s*\()"), "backward()"},
      {std::regex(R"((\.|->)\s*step\s*\()"), "an optimizer step()"},
      {std::regex(R"(\bmake_data_loader\b)"), "make_data_loader"},
      {std::regex(R"([:,]\s*((public|protected|private)\s+)?(torch::)?nn::(Module|Cloneable)\b)"),
       "a torch::nn::Module subclass"},
      {std::regex(R"(\boptim::[A-Za-z])"), "a torch::optim optimizer"},
  };
  std::vector<std::string> found;
  for (const auto &[pattern, what] : kinds)
    if (std::regex_search(code, pattern)) found.push_back(what);
  return found;
}

std::vector<ParseFailure> describeFailures(const std::vector<UnitResult> &units) {
  std::vector<ParseFailure> failures;
  // clang: "<file>:<line>:<col>: error: 'Eigen/Core' file not found" (also "... with <angled>
  // include; use "quotes" instead").
  llvm::Regex notFound("^(.*):([0-9]+):[0-9]+: error: '([^']+)' file not found");
  for (const UnitResult &unit : units) {
    if (unit.parsed) continue;
    ParseFailure failure;
    failure.unit = &unit;
    if (auto buffer = llvm::MemoryBuffer::getFile(unit.mainFile))
      failure.trainingCode = trainingCodeIn((*buffer)->getBuffer());
    llvm::SmallVector<llvm::StringRef, 4> match;
    if (notFound.match(unit.diagnostic, &match)) {
      failure.missingHeader = match[3].str();
      failure.includedAt = match[1].str() + ":" + match[2].str();
    }
    failures.push_back(std::move(failure));
  }
  return failures;
}

std::string missingHeaderAdvice(const std::vector<ParseFailure> &failures, const CompileFlags &flags,
                                const std::vector<std::string> &inputs, const DisplayPath &display) {
  std::map<std::string, std::vector<const ParseFailure *>> byHeader;
  for (const ParseFailure &failure : failures)
    if (!failure.missingHeader.empty()) byHeader[failure.missingHeader].push_back(&failure);
  std::vector<std::string> shownInputs;
  for (const std::string &input : inputs) shownInputs.push_back(shellQuote(input));
  std::string inputText = llvm::join(shownInputs, " ");

  std::string out;
  for (const auto &[header, where] : byHeader) {
    std::vector<std::string> includes;
    for (const ParseFailure *failure : where) {
      // includedAt is "<absolute file>:<line>"
      llvm::StringRef at = failure->includedAt;
      auto [file, line] = at.rsplit(':');
      includes.push_back(display(file.str()) + ":" + line.str());
    }
    out += "acc-migrate: '" + header + "' not found (included at " + llvm::join(includes, ", ") + ") " +
           flagsUsed(flags, where.front()->unit->mainFile, display) + "\n";
    const MissedPackage *provider = likelyProvider(flags.missedPackages, header);
    if (provider) {
      out += "  it most likely comes from the package " + provider->name + ": find_package(" + provider->name +
             ") at " + display(provider->file) + ":" + std::to_string(provider->line) +
             " found nothing in acc-migrate's configure\n";
    } else if (!flags.missedPackages.empty()) {
      std::vector<std::string> names;
      for (const MissedPackage &m : flags.missedPackages)
        names.push_back(m.name + " (" + display(m.file) + ":" + std::to_string(m.line) + ")");
      out += "  packages the project looks for that acc-migrate's configure did not find: " + llvm::join(names, ", ") +
             "\n";
    }
    if (!flags.projectTop.empty()) {
      // The user's own build directory when there is one: configuring it again keeps its settings
      // and adds compile_commands.json.
      std::string build = flags.userBuildDir.empty() ? flags.projectTop + "/build" : flags.userBuildDir;
      std::string configure = commandWords(
          {"cmake", "-S", display(flags.projectTop), "-B", display(build), "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"});
      if (flags.userBuildDir.empty())
        configure +=
            " -DCMAKE_PREFIX_PATH=<" +
            (provider ? provider->name + "'s install prefix" : "install prefix of the package with " + header) + ">";
      out +=
          "  fix: configure the project as you build it, with compile commands, and migrate with that build's "
          "flags:\n    " +
          configure + "\n    acc-migrate -p " + shellQuote(display(build)) + " " + inputText + "\n";
    } else {
      out +=
          "  fix: migrate with the flags of your build, configured with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON:\n"
          "    acc-migrate -p <build dir> " +
          inputText + "\n";
    }
    out += "  or name the directory that holds " + header + ":\n    acc-migrate " + inputText + " -- -I<dir>\n";
  }
  return out;
}

std::string failureSummary(const std::vector<ParseFailure> &failures, const DisplayPath &display) {
  if (failures.empty()) return "0 failed";
  size_t headers = 0;
  std::vector<std::string> training;
  for (const ParseFailure &failure : failures) {
    if (!failure.missingHeader.empty()) ++headers;
    if (!failure.trainingCode.empty()) training.push_back(display(failure.unit->mainFile));
  }
  return std::to_string(failures.size()) + " failed (not migrated: " + std::to_string(headers) +
         " for a header not found, " + std::to_string(failures.size() - headers) + " for another error; " +
         (training.empty() ? std::string("none with training code in its text")
                           : std::to_string(training.size()) + " with training code: " + llvm::join(training, ", ")) +
         ")";
}

}  // namespace accmigrate

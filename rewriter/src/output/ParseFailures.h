// The sources that did not parse: what each holds of training code (read from its text, since there
// is no AST), which header was missing when that was clang's first error, and the advice that names
// the package most likely to provide it and the commands that pass it. A source left unchanged with
// only "0 edits" to show for it is the failure this exists to prevent.
#pragma once
#include "engine/Result.h"
#include "project/CompileFlags.h"

#include <llvm/ADT/StringRef.h>
#include <functional>
#include <string>
#include <vector>

namespace accmigrate {

struct ParseFailure {
  const UnitResult *unit = nullptr;
  std::vector<std::string> trainingCode;  // what its text shows of training code ("backward()", ...)
  std::string missingHeader;              // the header not found, when that was clang's first error
  std::string includedAt;                 // file:line of that #include (a header of the project, maybe)
};

// The units that did not parse, in their order.
std::vector<ParseFailure> describeFailures(const std::vector<UnitResult> &units);

// Training code in a source's text (comments ignored): a tensor's backward(), an optimizer's step(),
// make_data_loader, a torch::nn::Module subclass, a torch::optim optimizer. Textual, so a name in a
// string counts; it only decides what a message says.
std::vector<std::string> trainingCodeIn(llvm::StringRef text);

using DisplayPath = std::function<std::string(const std::string &)>;

// Once per missing header: where it is included, with which flags, the package that most likely
// provides it (the project's find_package calls that found nothing in acc-migrate's configure), and
// the commands that pass it (configure with compile commands and -p, or -- -I). Lines end in '\n'.
std::string missingHeaderAdvice(const std::vector<ParseFailure> &failures, const CompileFlags &flags,
                                const std::vector<std::string> &inputs, const DisplayPath &display);

// The summary's account of the failures: "2 failed (not migrated: 1 for a header not found, 1 for
// another error; 1 with training code: src/train.cpp)"; "0 failed" when none did.
std::string failureSummary(const std::vector<ParseFailure> &failures, const DisplayPath &display);

}  // namespace accmigrate

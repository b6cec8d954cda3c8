// Parsing in-memory sources against the REAL libtorch headers in unit tests, as acc-migrate parses a
// user's files: the venv's torch (found as acc-migrate finds it: $ACC_VENV, else ~/.cache/acc/venv,
// made by scripts/setup) and acc's runtime headers, with <torch/torch.h> loaded from a precompiled
// header (acc-migrate's PchCache) that is built once per build tree and shared by every test, test
// process and run. Parsing <torch/torch.h> without it takes ~7 s; with it, well under a second.
//
//   std::vector<std::string> args = accmigrate::test::realTorchArgs();
//   ASSERT_FALSE(args.empty()) << accmigrate::test::realTorchError();
//   tooling::runToolOnCodeWithArgs(std::move(action), code, args, "/project/train.cpp");
//   std::unique_ptr<ASTUnit> ast = tooling::buildASTFromCodeWithArgs(code, args, "/project/train.cpp");
#pragma once
#include <string>
#include <vector>

namespace accmigrate {
namespace test {

// Compiler arguments for code that includes <torch/torch.h> (and <acc/acc.h>): -std=c++17, the
// torch and acc include directories, clang's resource directory and `-include-pch <torch PCH>`.
// Empty when torch's headers are not found or its PCH cannot be built (realTorchError() says why).
// Computed once per process; the first process of a build tree builds the PCH.
const std::vector<std::string> &realTorchArgs();

// Why realTorchArgs() is empty ("" when it is not).
const std::string &realTorchError();

}  // namespace test
}  // namespace accmigrate

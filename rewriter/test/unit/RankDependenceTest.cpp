// RankDependence on in-memory sources against the stub headers: which values may differ between
// processes, and which statements some ranks may not reach (save-on-main-process inserts a barrier
// only where every rank does).
#include "RankDependence.h"

#include <clang/ASTMatchers/ASTMatchFinder.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <clang/Lex/Lexer.h>
#include <clang/Tooling/Tooling.h>
#include <gtest/gtest.h>
#include <map>
#include <memory>
#include <string>

using namespace clang;
using namespace clang::ast_matchers;

namespace {

// `probe("name", value)`: is `value` rank-local? `mark("name")`: the text of the rank-local condition
// that decides whether the mark runs ("" for none).
const char *const kCode = R"(#include <acc/acc.h>
bool probe(const char *, double) { return true; }
void mark(const char *) {}
const int kEvery = 10;
void train(acc::Accelerator &accelerator, torch::Tensor loss, int epochs, bool verbose, float lr) {
  float reward = loss.item<float>();
  float best = -1;
  best = reward;
  int steps = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    steps += 2;
    probe("epoch", epoch);
    probe("steps", steps);
    mark("in a counted loop");
    if (epoch % kEvery == 0) mark("under a uniform if");
    if (best > 0) mark("under a rank-local if");
    if (verbose) { if (accelerator.process_index() == 0) mark("under process_index"); }
  }
  const int half = epochs / 2;
  int escapes = 0;
  int *pointer = &escapes;
  int cycle = 0;
  cycle = cycle + 1;
  int mixed = 0;
  mixed = mixed + 1;
  mixed = reward;
  probe("literal", 3);
  probe("item", loss.item<float>());
  probe("reward", reward);
  probe("best", best);
  probe("int parameter", epochs);
  probe("bool parameter", verbose);
  probe("float parameter", lr);
  probe("const from a parameter", half);
  probe("global constant", kEvery);
  probe("process_index", accelerator.process_index());
  probe("is_main_process", accelerator.is_main_process());
  probe("address taken", escapes);
  probe("stepped from itself", cycle);
  probe("assigned a rank-local value", mixed);
  while (loss.item<float>() > 0) mark("in a tensor while");
  epochs > 3 ? mark("in a uniform ?:") : mark("other");
  reward > 0 && (mark("right of a rank-local &&"), true);
  switch (epochs) { case 1: mark("in a uniform switch"); }
  for (int i = 0; i < 3; ++i) {
    if (reward > 1) continue;
    mark("after a rank-local continue");
  }
  for (int i = 0; i < 3; ++i) {
    mark("before a rank-local continue");
    if (reward > 1) continue;
  }
  for (int i = 0; i < 3; ++i) {
    mark("before a rank-local break");
    if (reward > 1) break;
  }
  mark("after a loop with a rank-local break");
  if (reward > 2) return;
  mark("after a rank-local return");
}
)";

struct Results {
  std::map<std::string, bool> rankLocal;
  std::map<std::string, std::string> condition;
};

Results analyse() {
  Results results;
  std::unique_ptr<ASTUnit> ast = tooling::buildASTFromCodeWithArgs(
      kCode, {"-std=c++17", "-isystem", ACC_MIGRATE_TEST_DIR "/Inputs/stub", "-resource-dir=" ACC_CLANG_RESOURCE_DIR},
      "/project/train.cpp");
  EXPECT_TRUE(ast && !ast->getDiagnostics().hasErrorOccurred());
  if (!ast) return results;
  ASTContext &ctx = ast->getASTContext();
  accmigrate::RankDependence ranks(ctx);
  auto named = [](const Expr *arg) {
    return std::string(cast<StringLiteral>(arg->IgnoreParenImpCasts())->getString());
  };
  for (const BoundNodes &nodes :
       match(findAll(callExpr(callee(functionDecl(hasName("probe")))).bind("call")), ctx)) {
    const auto *call = nodes.getNodeAs<CallExpr>("call");
    results.rankLocal[named(call->getArg(0))] = ranks.isRankLocal(call->getArg(1));
  }
  for (const BoundNodes &nodes : match(findAll(callExpr(callee(functionDecl(hasName("mark")))).bind("call")), ctx)) {
    const auto *call = nodes.getNodeAs<CallExpr>("call");
    const Expr *condition = ranks.rankLocalCondition(*call);
    results.condition[named(call->getArg(0))] =
        condition ? Lexer::getSourceText(CharSourceRange::getTokenRange(condition->getSourceRange()),
                                         ctx.getSourceManager(), ctx.getLangOpts())
                        .str()
                  : "";
  }
  return results;
}

TEST(RankDependence, Values) {
  Results r = analyse();
  for (const char *uniform : {"epoch", "steps", "literal", "int parameter", "bool parameter", "const from a parameter",
                              "global constant", "stepped from itself"})
    EXPECT_FALSE(r.rankLocal.at(uniform)) << uniform;
  for (const char *local : {"item", "reward", "best", "float parameter", "process_index", "is_main_process",
                            "address taken", "assigned a rank-local value"})
    EXPECT_TRUE(r.rankLocal.at(local)) << local;
}

TEST(RankDependence, Conditions) {
  Results r = analyse();
  for (const char *reached : {"in a counted loop", "under a uniform if", "in a uniform ?:", "in a uniform switch",
                              "before a rank-local continue", "after a loop with a rank-local break"})
    EXPECT_EQ(r.condition.at(reached), "") << reached;
  EXPECT_EQ(r.condition.at("under a rank-local if"), "best > 0");
  EXPECT_EQ(r.condition.at("under process_index"), "accelerator.process_index() == 0");
  EXPECT_EQ(r.condition.at("in a tensor while"), "loss.item<float>() > 0");
  EXPECT_EQ(r.condition.at("right of a rank-local &&"), "reward > 0");
  EXPECT_EQ(r.condition.at("after a rank-local continue"), "reward > 1");
  EXPECT_EQ(r.condition.at("before a rank-local break"), "reward > 1");
  EXPECT_EQ(r.condition.at("after a rank-local return"), "reward > 2");
}

}  // namespace

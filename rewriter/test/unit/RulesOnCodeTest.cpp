// Rules on in-memory sources (clang::tooling::runToolOnCodeWithArgs) against the real torch headers
// (RealTorch.h: the venv's torch through a precompiled header): what one rule does alone, how facts
// flow from a rule to another and to the finalizers, and that a rule touching a fact it does not
// declare is stopped.
#include "RealTorch.h"
#include "engine/AcceleratorPlacement.h"
#include "engine/Migration.h"
#include "engine/Result.h"
#include "engine/Rule.h"

#include <clang/AST/ASTConsumer.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/FrontendAction.h>
#include <clang/Tooling/Tooling.h>
#include <gtest/gtest.h>
#include <llvm/Support/MemoryBuffer.h>
#include <algorithm>
#include <iostream>
#include <set>
#include <string>
#include <vector>

using namespace accmigrate;

namespace {

const char *const kProject = "/project";
const char *const kFile = "/project/train.cpp";

// Parses `code` as /project/train.cpp and runs `rules`, then the finalizers, like acc-migrate does
// (the bodies of functions outside the project are skipped, as acc-migrate's driver skips them).
class RulesAction : public clang::ASTFrontendAction {
 public:
  RulesAction(const ProjectScope &scope, std::vector<const Rule *> rules, RuleSettings settings, UnitResult &out)
      : scope_(scope), rules_(std::move(rules)), settings_(std::move(settings)), out_(out) {}
  bool BeginInvocation(clang::CompilerInstance &ci) override {
    ci.getFrontendOpts().SkipFunctionBodies = true;  // where the consumer says so
    return true;
  }
  std::unique_ptr<clang::ASTConsumer> CreateASTConsumer(clang::CompilerInstance &ci, llvm::StringRef) override {
    struct Consumer : clang::ASTConsumer {
      RulesAction &action;
      const clang::SourceManager &sm;
      ProjectFiles project;
      Consumer(RulesAction &a, const clang::SourceManager &sm) : action(a), sm(sm), project(sm, a.scope_) {}
      bool shouldSkipFunctionBody(clang::Decl *d) override {
        return !project.contains(sm.getExpansionLoc(d->getLocation()));
      }
      void HandleTranslationUnit(clang::ASTContext &ctx) override {
        if (ctx.getDiagnostics().hasErrorOccurred()) return;
        action.out_.parsed = true;
        runRules(ctx, action.scope_, action.rules_, action.out_, action.settings_);
      }
    };
    return std::make_unique<Consumer>(*this, ci.getSourceManager());
  }

 private:
  const ProjectScope &scope_;
  std::vector<const Rule *> rules_;
  RuleSettings settings_;
  UnitResult &out_;
};

UnitResult migrate(const std::string &code, const std::vector<std::string> &ruleNames,
                   std::vector<std::string> extraArgs = {}, RuleSettings settings = {}) {
  std::vector<const Rule *> rules;
  for (const std::string &name : ruleNames) {
    const Rule *rule = findRule(name);
    EXPECT_TRUE(rule && !isFinalizer(*rule)) << name;
    if (rule) rules.push_back(rule);
  }
  ProjectScope scope({kProject});
  UnitResult out;
  std::vector<std::string> args = test::realTorchArgs();
  EXPECT_FALSE(args.empty()) << test::realTorchError();
  args.insert(args.end(), extraArgs.begin(), extraArgs.end());
  clang::tooling::runToolOnCodeWithArgs(std::make_unique<RulesAction>(scope, rules, std::move(settings), out), code,
                                        args, kFile);
  std::vector<UnitResult> units{std::move(out)};
  applyAcceleratorPlacement(units);
  return std::move(units.front());
}

// The edits applied to `code` (insertions at one offset in the order the rules made them).
std::string applied(std::string code, std::vector<Edit> edits) {
  std::stable_sort(edits.begin(), edits.end(), [](const Edit &a, const Edit &b) { return a.offset < b.offset; });
  for (auto it = edits.rbegin(); it != edits.rend(); ++it) code.replace(it->offset, it->length, it->text);
  return code;
}

std::set<std::string> rulesThatActed(const UnitResult &out) {
  std::set<std::string> rules;
  for (const Edit &e : out.edits) rules.insert(e.rule);
  for (const Finding &f : out.findings) rules.insert(f.rule);
  return rules;
}

TEST(RulesOnCode, BackwardAloneWithTheFinalizers) {
  const char *code = R"(#include <torch/torch.h>
struct Grad { void backward() {} };
void train(torch::Tensor loss, Grad g) {
  loss.backward();
  g.backward();
}
)";
  UnitResult out = migrate(code, {"backward"});
  ASSERT_TRUE(out.parsed);
  // Only a tensor's backward (the type filter is in the matcher); the finalizers declare the
  // accelerator where it is now used and include acc/acc.h.
  EXPECT_EQ(applied(code, out.edits), R"(#include <torch/torch.h>
#include <acc/acc.h>
struct Grad { void backward() {} };
void train(torch::Tensor loss, Grad g) {
  acc::Accelerator accelerator;
  accelerator.backward(loss);
  g.backward();
}
)");
  EXPECT_EQ(rulesThatActed(out), (std::set<std::string>{"backward", "create-accelerator", "include-acc"}));
  EXPECT_TRUE(out.findings.empty());
}

TEST(RulesOnCode, NoRuleNoEdit) {
  // Without a rule the finalizers have no facts to act on.
  UnitResult out = migrate("#include <torch/torch.h>\nvoid train(torch::Tensor loss) { loss.backward(); }\n", {});
  ASSERT_TRUE(out.parsed);
  EXPECT_TRUE(out.edits.empty());
  EXPECT_TRUE(out.findings.empty());
}

const char *const kModelMove = R"(#include <torch/torch.h>
struct NetImpl : torch::nn::Module {};
int main() {
  torch::Device device(torch::kCUDA);
  auto model = std::make_shared<NetImpl>();
  model->to(device);
  torch::optim::Adam optimizer(model->parameters());
}
)";

// device-move consumes prepared-models: a model's move goes only where prepare places it.
TEST(RulesOnCode, DeviceMoveRemovesTheMovesOfPreparedModelsOnly) {
  UnitResult alone = migrate(kModelMove, {"device-move"});
  ASSERT_TRUE(alone.parsed);
  EXPECT_NE(applied(kModelMove, alone.edits).find("  model->to(device);\n"), std::string::npos);
  UnitResult prepared = migrate(kModelMove, {"prepare", "device-move"});
  ASSERT_TRUE(prepared.parsed);
  std::string migrated = applied(kModelMove, prepared.edits);
  EXPECT_EQ(migrated.find("model->to(device)"), std::string::npos) << migrated;
  EXPECT_NE(migrated.find("  accelerator.prepare(model, optimizer);\n"), std::string::npos) << migrated;
}

// scheduler-declaration produces accelerator-options; create-accelerator writes them where an
// accelerator is declared (main uses one through backward).
TEST(RulesOnCode, AcceleratorOptionsReachTheDeclaredAccelerator) {
  const char *code = R"(#include <torch/torch.h>
int main() {
  auto model = std::make_shared<torch::nn::LinearImpl>(4, 1);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  torch::optim::StepLR scheduler(optimizer, 2);
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (int i = 0; i < 4; ++i) {
      model->forward(torch::Tensor()).backward();
      optimizer.step();
    }
    scheduler.step();
  }
}
)";
  std::string migrated = applied(code, migrate(code, {"scheduler-declaration", "backward"}).edits);
  EXPECT_NE(migrated.find("acc::Accelerator accelerator(acc::AcceleratorOptions().step_scheduler_with_optimizer(false));"),
            std::string::npos)
      << migrated;
  // Alone, nothing uses an accelerator: the option has nowhere to go.
  migrated = applied(code, migrate(code, {"scheduler-declaration"}).edits);
  EXPECT_EQ(migrated.find("acc::Accelerator accelerator"), std::string::npos) << migrated;
  EXPECT_NE(migrated.find("acc::Scheduler<torch::optim::StepLR> scheduler(optimizer, 2);"), std::string::npos);
}

// The settings a lit test's first RUN line that gives them gives (--fsdp-units=A,B).
RuleSettings settingsOf(llvm::StringRef test) {
  RuleSettings settings;
  llvm::SmallVector<llvm::StringRef> lines;
  test.split(lines, '\n');
  for (llvm::StringRef line : lines) {
    size_t flag = line.find("--fsdp-units=");
    if (!line.contains("RUN:") || flag == llvm::StringRef::npos) continue;
    llvm::StringRef types = line.substr(flag + strlen("--fsdp-units=")).take_until(isspace);
    llvm::SmallVector<llvm::StringRef> parts;
    types.split(parts, ',', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef type : parts) settings.fsdpUnits.push_back(type.str());
    break;
  }
  return settings;
}

// Each rule alone over its own lit test (rewriter/test/<name>.cpp), with the settings it gives: it
// parses, and what happens is that rule's or a finalizer's. A rule that touched a fact it does not
// declare would stop the process here (Migration::access).
TEST(RulesOnCode, EachRuleAloneOnItsLitTest) {
  for (const Rule &rule : allRules()) {
    std::string path = std::string(ACC_MIGRATE_TEST_DIR) + "/" + rule.name + ".cpp";
    auto buffer = llvm::MemoryBuffer::getFile(path);
    ASSERT_TRUE(bool(buffer)) << path;
    UnitResult out = migrate((*buffer)->getBuffer().str(), {rule.name}, {}, settingsOf((*buffer)->getBuffer()));
    EXPECT_TRUE(out.parsed) << rule.name;
    for (const std::string &name : rulesThatActed(out))
      EXPECT_TRUE(name == rule.name || isFinalizer(*findRule(name))) << rule.name << ": " << name << " acted";
    // Rules that consume another rule's facts may have nothing to do alone; the others do.
    if (!rule.consumes)
      EXPECT_TRUE(rulesThatActed(out).count(rule.name)) << rule.name << " did nothing on its own test";
  }
}

// The facts are what the registry says: a rule writing or reading one it does not declare stops the
// tool with an error naming both, and no rule reads a fact while the traversal is still filling it.
Rule undeclaredWriter{"undeclared-writer", "writes accelerator-users without declaring it", true, 0, 0,
                      [](Migration &m) {
                        m.onMatch(clang::ast_matchers::functionDecl().bind("fn"),
                                  [&m](const clang::ast_matchers::BoundNodes &nodes) {
                                    m.useAccelerator(nodes.getNodeAs<clang::FunctionDecl>("fn"));
                                  });
                      }};
Rule earlyReader{"early-reader", "reads accelerator-users while matching", true, 0, AcceleratorUsers,
                 [](Migration &m) {
                   m.onMatch(clang::ast_matchers::functionDecl().bind("fn"),
                             [&m](const clang::ast_matchers::BoundNodes &) { m.acceleratorUsers(); });
                 }};

void runOnly(const Rule &rule) {
  ProjectScope scope({kProject});
  UnitResult out;
  clang::tooling::runToolOnCodeWithArgs(
      std::make_unique<RulesAction>(scope, std::vector<const Rule *>{&rule}, RuleSettings{}, out), "void train() {}\n",
      {"-std=c++17"}, kFile);
}

TEST(RulesOnCodeDeathTest, AnUndeclaredFactStopsTheTool) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(runOnly(undeclaredWriter), testing::ExitedWithCode(1),
              "rule 'undeclared-writer' writes the fact 'accelerator-users' without declaring it");
  EXPECT_EXIT(runOnly(earlyReader), testing::ExitedWithCode(1),
              "rule 'early-reader' reads the fact 'accelerator-users' while matching");
}

}  // namespace

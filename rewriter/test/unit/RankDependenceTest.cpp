// RankDependence on a training program parsed against the REAL libtorch and acc headers: which
// values may differ between processes, which statements some ranks may not reach (a collective is
// inserted only where every rank does), why, and what a rule may assume after inserting one.
//
// Parsing <torch/torch.h> takes seconds: the program is parsed once per test binary run (the
// fixture's SetUpTestSuite), with torch's headers precompiled once into the build tree's PCH cache
// (the one lit's tests use), so each ctest process loads them in a fraction of that.
#include "analysis/RankDependence.h"
#include "project/PchCache.h"

#include <clang/AST/StmtCXX.h>
#include <clang/ASTMatchers/ASTMatchFinder.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <clang/Frontend/ASTUnit.h>
#include <clang/Lex/Lexer.h>
#include <clang/Tooling/Tooling.h>
#include <gtest/gtest.h>
#include <llvm/Support/FileSystem.h>
#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace clang;
using namespace clang::ast_matchers;
using accmigrate::RankDependence;

namespace {

// `probe("name", value)`: is `value` rank-local? `mark("name")`: the rank-local condition that decides
// whether the mark runs ("" for none). Each name is used once, but in templates (one per instantiation).
const char *const kCode = R"cpp(#include <torch/torch.h>
#include <acc/accelerator.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <random>
#include <sstream>
#include <string>

template <typename T>
bool probe(const char *, const T &) { return true; }
void mark(const char *) {}

const int kEvery = 10;
int g_counter = 0;

struct Config {
  int epochs = 3;
  float lr = 0.1f;
  std::string data = "data";
};

// A config every rank reads from the same file before training.
Config load_config(const std::string &path) {
  Config cfg;
  std::ifstream in(path);
  std::string key;
  while (in >> key) {
    if (key == "epochs") in >> cfg.epochs;
    else if (key == "lr") in >> cfg.lr;
  }
  return cfg;
}

void read_lr(const std::string &path, float &out) {
  std::ifstream file(path);
  file >> out;
}

int parse_epochs(int argc, char **argv) { return argc > 1 ? std::atoi(argv[1]) : 3; }
int twice(int n) { return 2 * n; }
int plus_random(int n) { return n + std::rand(); }
int factorial(int n) { return n <= 1 ? 1 : n * factorial(n - 1); }
float mean_of(acc::Accelerator &accelerator, const torch::Tensor &t) {
  return accelerator.reduce(t, "mean").item<float>();
}
template <typename T>
T halve(T value) { return value / 2; }
template <int N>
int times() { return N * 3; }

struct Schedule {
  int every;
  int period() const { return every * 2; }
};

// Reached rank-locally only through their callers.
void save_best(torch::nn::Linear &model) {
  mark("helper called under a rank-local condition");
  torch::save(model, "helper.pt");
}
void log_alike() { mark("helper called alike"); }
void sometimes() { mark("helper called alike once and rank-locally once"); }
void deepest() { mark("two calls below a rank-local condition"); }
void middle() { deepest(); }

// Its parameters are what the calls in the unit pass.
void report(int value, float loss, float lr) {
  probe("int parameter passed a rank-local value", value);
  probe("float parameter passed a rank-local value", loss);
  probe("float parameter passed uniform values", lr);
}

// Not called in the unit: its integral and bool parameters are taken as uniform.
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
  probe("address taken", escapes);
  probe("stepped from itself", cycle);
  probe("assigned a rank-local value", mixed);
  while (loss.item<float>() > 0) mark("in a tensor while");
  epochs > 3 ? mark("in a uniform ?:") : mark("other");
  bool shortcut = reward > 0 && (mark("right of a rank-local &&"), true);
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

template <typename Model>
void evaluate(Model &model) {
  float total = 0;
  for (int i = 0; i < 3; ++i) total += model->forward(torch::randn({2, 4})).sum().template item<float>();
  if (total > 1) mark("template: after the reduced total");
}

int main(int argc, char **argv) {
  acc::Accelerator accelerator;
  const int epochs = argc > 1 ? std::stoi(argv[1]) : 3;
  const std::string data_dir = argc > 2 ? std::string(argv[2]) : "data";
  const double lr_arg = argc > 3 ? std::stod(argv[3]) : 0.01;
  const char *env_epochs = std::getenv("EPOCHS");
  const int env_count = env_epochs ? std::atoi(env_epochs) : 1;
  const int rank_env = std::atoi(std::getenv("RANK"));
  const int local_rank_env = std::atoi(std::getenv("LOCAL_RANK"));
  const char *devices = std::getenv("CUDA_VISIBLE_DEVICES");
  std::string variable = "EPOCHS";
  const char *dynamic_env = std::getenv(variable.c_str());
  const int parsed = parse_epochs(argc, argv);
  const Config cfg = load_config(data_dir + "/config.txt");
  float file_lr = 0.1f;
  std::ifstream hparams(data_dir + "/hparams.txt");
  hparams >> file_lr;
  float out_lr = 0;
  read_lr("lr.txt", out_lr);
  std::istringstream words(argv[0]);
  std::string first_word;
  words >> first_word;
  int typed = 0;
  std::cin >> typed;
  constexpr int kBatch = 64;
  const float largest = std::numeric_limits<float>::max();
  const int world = accelerator.num_processes();
  const int index = accelerator.process_index();
  const bool main_process = accelerator.is_main_process();
  const int random = std::rand();
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  const Schedule schedule{kEvery};
  int *address = &g_counter;
  probe("argc", argc);
  probe("argv[1]", argv[1]);
  probe("epochs from argv", epochs);
  probe("std::string(argv[2])", data_dir);
  probe("std::stod(argv[3])", lr_arg);
  probe("getenv EPOCHS", env_count);
  probe("getenv RANK", rank_env);
  probe("getenv LOCAL_RANK", local_rank_env);
  probe("getenv CUDA_VISIBLE_DEVICES", devices);
  probe("getenv with a computed name", dynamic_env);
  probe("parse_epochs(argc, argv)", parsed);
  probe("config from a file", cfg.epochs);
  probe("read from a file before training", file_lr);
  probe("written by a project function from a file", out_lr);
  probe("read from a string", first_word);
  probe("stdin", typed);
  probe("constexpr", kBatch);
  probe("numeric_limits", largest);
  probe("template argument", times<kBatch>());
  probe("num_processes", world);
  probe("process_index", index);
  probe("is_main_process", main_process);
  probe("random", random);
  probe("time", now);
  probe("twice(epochs)", twice(epochs));
  probe("twice(index)", twice(index));
  probe("plus_random(epochs)", plus_random(epochs));
  probe("recursion", factorial(epochs));
  probe("halve(epochs)", halve(epochs));
  probe("const method of a uniform struct", schedule.period());
  probe("non-const global", g_counter);
  probe("address", address);

  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), cfg.lr);
  float best = largest;
  float val_loss = 0;
  float other = 0;
  torch::Tensor val_total = torch::zeros({1});
  int counted = 0;
  auto save_lambda = [&](int step) {
    mark("lambda called under a rank-local condition");
    probe("lambda parameter", step);
  };
  for (int epoch = 0; epoch < epochs; ++epoch) {
    mark("in the epoch loop");
    auto loss = model->forward(torch::randn({8, 4})).mean();
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    torch::save(model, "last.pt");
    if (loss.item<float>() < best) {
      best = loss.item<float>();
      torch::save(model, "best.pt");
      save_best(model);
      sometimes();
      middle();
      save_lambda(epoch);
    }
    log_alike();
    sometimes();
    const float mean_loss = accelerator.reduce(loss.detach(), "mean").item<float>();
    probe("item of a reduced tensor", mean_loss);
    const auto gathered = accelerator.gather(loss.detach());
    probe("size of a gathered tensor", gathered.size(0));
    probe("mean_of(accelerator, loss)", mean_of(accelerator, loss));
    if (mean_loss < largest) mark("under a reduced loss");
    if (epoch % cfg.epochs == 0) mark("under a condition from the config");
    if (accelerator.check_trigger()) mark("under check_trigger");
    if (index == 0) mark("under process_index in main");
    val_loss += loss.item<float>();
    other += loss.item<float>();
    val_total += loss.detach();
    const auto snapshot = val_total;
    int *escaped = &counted;
    probe("val_loss in the loop", val_loss);
    report(index, loss.item<float>(), file_lr);
  }
  report(0, 0.f, cfg.lr);
  if (val_loss < 1.0f) mark("after the reduce point");
  float best_val = largest;
  if (val_loss < best_val) best_val = val_loss;
  probe("best from the reduced value", best_val);
  other += random;
  probe("rank-local write after the point", other);
  probe("tensor aliased before the point", val_total.item<float>());
  probe("int aliased before the point", counted);
  std::ifstream late("late.txt");
  float late_lr = 0;
  late >> late_lr;
  probe("read from a file after training", late_lr);
  Config changed = cfg;
  changed.lr = best;
  probe("struct with a rank-local member", changed.epochs);
  torch::nn::Sequential sequential(torch::nn::Linear(4, 1));
  evaluate(model);
  evaluate(sequential);
  return 0;
}
)cpp";

// The venv's torch include directories (scripts/setup), as acc-migrate infers them.
std::vector<std::string> torchIncludeDirs() {
  const char *env = std::getenv("ACC_VENV");
  const char *home = std::getenv("HOME");
  std::string venv = env ? env : home ? std::string(home) + "/.cache/acc/venv" : "";
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(venv + "/lib", ec), end; it != end && !ec; it.increment(ec)) {
    std::string include = it->path() + "/site-packages/torch/include";
    if (llvm::sys::fs::is_directory(include + "/torch/csrc/api/include"))
      return {include, include + "/torch/csrc/api/include"};
  }
  return {};
}

class RankDependenceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::vector<std::string> torch = torchIncludeDirs();
    if (torch.empty()) {
      skip_ = "no torch in the venv (run scripts/setup)";
      return;
    }
    std::vector<std::string> flags = {"-std=c++17"};
    for (const std::string &dir : torch) flags.insert(flags.end(), {"-isystem", dir});
    // acc as an installed package provides it: a system include directory.
    flags.insert(flags.end(), {"-isystem", ACC_MIGRATE_TEST_DIR "/../../runtime/include", "-isystem",
                               ACC_MIGRATE_TEST_DIR "/../../contract"});
    accmigrate::PchCache cache(ACC_MIGRATE_TEST_PCH_CACHE, {});
    tooling::CompileCommand command;
    command.Directory = ACC_MIGRATE_TEST_PCH_CACHE;
    llvm::sys::fs::create_directories(command.Directory);
    command.Filename = "/project/train.cpp";
    command.CommandLine = {"clang-tool"};
    command.CommandLine.insert(command.CommandLine.end(), flags.begin(), flags.end());
    std::string pch = cache.pchFor(command);
    flags.push_back("-resource-dir=" ACC_CLANG_RESOURCE_DIR);
    if (!pch.empty()) flags.insert(flags.end(), {"-include-pch", pch});
    ast_ = tooling::buildASTFromCodeWithArgs(kCode, flags, "/project/train.cpp");
    if (!ast_ || ast_->getDiagnostics().hasErrorOccurred()) {
      ast_.reset();
      failure_ = "the test program does not parse against the real headers";
      return;
    }
    // As Migration does: the parent map covers the program's declarations, not all of torch's.
    ASTContext &ctx = ast_->getASTContext();
    std::vector<Decl *> program;
    for (Decl *d : ctx.getTranslationUnitDecl()->noload_decls())
      if (ctx.getSourceManager().isInMainFile(d->getLocation())) program.push_back(d);
    ctx.setTraversalScope(program);
  }
  static void TearDownTestSuite() { ast_.reset(); }

  void SetUp() override {
    if (!failure_.empty()) FAIL() << failure_;
    if (!ast_) GTEST_SKIP() << skip_;
    ranks_ = std::make_unique<RankDependence>(ast_->getASTContext());
  }

  ASTContext &ctx() { return ast_->getASTContext(); }

  // What `matcher` binds as `id` in the bodies of the program's functions, templates' patterns and
  // instantiations included (torch's are not looked at).
  template <typename Node, typename Matcher>
  std::vector<const Node *> find(const Matcher &matcher, const char *id) {
    std::vector<const Stmt *> bodies;
    for (Decl *d : ctx().getTraversalScope()) {
      if (const auto *fn = dyn_cast<FunctionDecl>(d); fn && fn->hasBody()) bodies.push_back(fn->getBody());
      if (const auto *pattern = dyn_cast<FunctionTemplateDecl>(d)) {
        bodies.push_back(pattern->getTemplatedDecl()->getBody());
        for (const FunctionDecl *instance : pattern->specializations()) bodies.push_back(instance->getBody());
      }
    }
    std::vector<const Node *> found;
    for (const Stmt *body : bodies)
      if (body)
        for (const BoundNodes &nodes : match(findAll(matcher), *body, ctx()))
          if (const auto *node = nodes.getNodeAs<Node>(id)) found.push_back(node);
    return found;
  }
  // The calls of `function` in the program, by their first argument (a string literal).
  std::map<std::string, std::vector<const CallExpr *>> calls(const char *function) {
    std::map<std::string, std::vector<const CallExpr *>> found;
    for (const CallExpr *call : find<CallExpr>(callExpr(callee(functionDecl(hasName(function)))).bind("call"), "call"))
      if (const auto *name = dyn_cast<StringLiteral>(call->getArg(0)->IgnoreParenImpCasts()))
        found[name->getString().str()].push_back(call);
    return found;
  }
  const CallExpr *one(const char *function, const std::string &name) {
    auto found = calls(function);
    EXPECT_EQ(found[name].size(), 1u) << function << "(\"" << name << "\")";
    return found[name].empty() ? nullptr : found[name].front();
  }
  bool rankLocal(const std::string &probe) {
    const CallExpr *call = one("probe", probe);
    return call && ranks_->isRankLocal(call->getArg(1));
  }
  std::string text(const Stmt *s) {
    if (!s) return "";
    return Lexer::getSourceText(CharSourceRange::getTokenRange(s->getSourceRange()), ctx().getSourceManager(),
                                ctx().getLangOpts())
        .str();
  }
  // The text of the rank-local condition that decides `s` ("" for none).
  std::string condition(const Stmt *s) { return s ? text(ranks_->rankLocalCondition(*s)) : "<none>"; }
  std::string markCondition(const std::string &mark) { return condition(one("mark", mark)); }
  // The line of the program where `needle` first occurs.
  static unsigned lineOf(const std::string &needle) {
    std::string code = kCode;
    size_t at = code.find(needle);
    EXPECT_NE(at, std::string::npos) << needle;
    return 1 + std::count(code.begin(), code.begin() + std::min(at, code.size()), '\n');
  }
  static std::string at(const std::string &needle) { return "(line " + std::to_string(lineOf(needle)) + ")"; }
  // The torch::save(model, "<path>") call.
  const CallExpr *save(const std::string &path) {
    const CallExpr *found = nullptr;
    for (const CallExpr *call : find<CallExpr>(callExpr(callee(functionDecl(hasName("::torch::save")))).bind("c"), "c"))
      if (const auto *literal = dyn_cast<StringLiteral>(call->getArg(1)->IgnoreParenImpCasts());
          literal && literal->getString() == path)
        found = call;
    EXPECT_TRUE(found) << path;
    return found;
  }
  // The variable `name` declared in function `function` as written (the pattern, for a template).
  const VarDecl *variable(const std::string &function, const std::string &name) {
    for (const DeclStmt *decl : find<DeclStmt>(declStmt().bind("decl"), "decl"))
      for (const Decl *d : decl->decls())
        if (const auto *var = dyn_cast<VarDecl>(d); var && var->getName() == name)
          if (const auto *fn = dyn_cast<FunctionDecl>(var->getDeclContext());
              fn && fn->getName() == function && !fn->isTemplateInstantiation())
            return var;
    ADD_FAILURE() << function << "'s " << name;
    return nullptr;
  }
  // Where the loop over `counter` in `function` (as written) ends.
  SourceLocation endOfLoop(const std::string &function, const std::string &counter) {
    const VarDecl *var = variable(function, counter);
    for (const ForStmt *loop : find<ForStmt>(forStmt().bind("loop"), "loop"))
      if (const auto *init = dyn_cast_or_null<DeclStmt>(loop->getInit());
          var && init && init->isSingleDecl() && init->getSingleDecl() == var)
        return loop->getEndLoc();
    ADD_FAILURE() << function << "'s loop over " << counter;
    return SourceLocation();
  }

  static std::unique_ptr<ASTUnit> ast_;
  static std::string skip_;
  static std::string failure_;
  std::unique_ptr<RankDependence> ranks_;
};

std::unique_ptr<ASTUnit> RankDependenceTest::ast_;
std::string RankDependenceTest::skip_;
std::string RankDependenceTest::failure_;

// The issue's case: an epoch count from the command line keeps the per-epoch save reached by every
// rank (a barrier goes in), while a save under the loss is not, and the explanation names `loss`.
TEST_F(RankDependenceTest, EpochsFromTheCommandLineAreUniformTheLossIsNot) {
  EXPECT_FALSE(rankLocal("epochs from argv"));
  EXPECT_EQ(condition(save("last.pt")), "");
  EXPECT_EQ(markCondition("in the epoch loop"), "");
  const CallExpr *best = save("best.pt");
  EXPECT_EQ(condition(best), "loss.item<float>() < best");
  const Expr *cond = ranks_->rankLocalCondition(*best);
  ASSERT_TRUE(cond);
  EXPECT_EQ(ranks_->explain(cond), "`loss.item<float>() < best` depends on `loss`, computed from "
                                   "`model->forward(torch::randn({8, 4})).mean()` " +
                                       at("auto loss = ") + ", a tensor, which differs between processes");
  const VarDecl *var = ranks_->rankLocalVariable(cond);
  ASSERT_TRUE(var);
  EXPECT_EQ(var->getName(), "loss");
}

TEST_F(RankDependenceTest, CommandLineAndEnvironmentAreUniform) {
  for (const char *uniform : {"argc", "argv[1]", "std::string(argv[2])", "std::stod(argv[3])", "getenv EPOCHS",
                              "parse_epochs(argc, argv)"})
    EXPECT_FALSE(rankLocal(uniform)) << uniform;
}

TEST_F(RankDependenceTest, LaunchVariablesThatDifferPerProcessAreRankLocal) {
  for (const char *local : {"getenv RANK", "getenv LOCAL_RANK", "getenv CUDA_VISIBLE_DEVICES",
                            "getenv with a computed name"})
    EXPECT_TRUE(rankLocal(local)) << local;
  const CallExpr *probe = one("probe", "getenv RANK");
  ASSERT_TRUE(probe);
  EXPECT_NE(ranks_->explain(probe->getArg(1)).find("the launch variable RANK, which differs between processes"),
            std::string::npos)
      << ranks_->explain(probe->getArg(1));
  for (const char *name : {"RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "SLURM_PROCID", "SLURM_LOCALID",
                           "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "MPI_LOCALRANKID",
                           "PMIX_RANK", "CUDA_VISIBLE_DEVICES", "HOSTNAME", "SLURM_NODEID", "ACC_STORE_LISTEN_FD"})
    EXPECT_TRUE(RankDependence::isPerProcessVariable(name)) << name;
  for (const char *name : {"WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "EPOCHS", "ACC_CONFIG_FILE", "SLURM_NTASKS"})
    EXPECT_FALSE(RankDependence::isPerProcessVariable(name)) << name;
}

// "Before training": no training step and no file write before the read or around it.
TEST_F(RankDependenceTest, FilesReadBeforeTrainingAreUniformAfterItNot) {
  for (const char *uniform : {"config from a file", "read from a file before training",
                              "written by a project function from a file", "read from a string"})
    EXPECT_FALSE(rankLocal(uniform)) << uniform;
  EXPECT_EQ(markCondition("under a condition from the config"), "");
  EXPECT_TRUE(rankLocal("read from a file after training"));
  EXPECT_TRUE(rankLocal("stdin"));
  const CallExpr *late = one("probe", "read from a file after training");
  ASSERT_TRUE(late);
  EXPECT_NE(ranks_->explain(late->getArg(1)).find("read from a file after `loss.backward()` " +
                                                 at("loss.backward()") + ": another process may have written it"),
            std::string::npos)
      << ranks_->explain(late->getArg(1));
  const CallExpr *typed = one("probe", "stdin");
  ASSERT_TRUE(typed);
  EXPECT_NE(ranks_->explain(typed->getArg(1)).find("standard input, which launchers give to one process only"),
            std::string::npos)
      << ranks_->explain(typed->getArg(1));
}

TEST_F(RankDependenceTest, CompileTimeConstantsAreUniform) {
  for (const char *uniform : {"constexpr", "numeric_limits", "template argument", "global constant", "literal"})
    EXPECT_FALSE(rankLocal(uniform)) << uniform;
}

TEST_F(RankDependenceTest, TheAcceleratorsCollectivesAreUniformItsQueriesNot) {
  for (const char *uniform : {"num_processes", "item of a reduced tensor", "size of a gathered tensor",
                              "mean_of(accelerator, loss)"})
    EXPECT_FALSE(rankLocal(uniform)) << uniform;
  EXPECT_EQ(markCondition("under a reduced loss"), "");
  EXPECT_EQ(markCondition("under check_trigger"), "");
  for (const char *local : {"process_index", "is_main_process", "random", "time", "non-const global", "address"})
    EXPECT_TRUE(rankLocal(local)) << local;
  EXPECT_EQ(markCondition("under process_index in main"), "index == 0");
  const CallExpr *mark = one("mark", "under process_index in main");
  ASSERT_TRUE(mark);
  EXPECT_EQ(ranks_->explain(ranks_->rankLocalCondition(*mark)),
            "`index == 0` depends on `index`, computed from `accelerator.process_index()` " +
                at("const int index = ") + ", the process index, which differs between processes");
  EXPECT_EQ(ranks_->rankLocalVariable(ranks_->rankLocalCondition(*mark))->getName(), "index");
}

// The project's functions are followed: a result computed from uniform arguments is uniform.
TEST_F(RankDependenceTest, ProjectFunctionsAreFollowed) {
  for (const char *uniform : {"twice(epochs)", "halve(epochs)", "const method of a uniform struct"})
    EXPECT_FALSE(rankLocal(uniform)) << uniform;
  for (const char *local : {"twice(index)", "plus_random(epochs)", "recursion"}) EXPECT_TRUE(rankLocal(local)) << local;
  const CallExpr *noisy = one("probe", "plus_random(epochs)");
  ASSERT_TRUE(noisy);
  EXPECT_EQ(ranks_->explain(noisy->getArg(1)), "`plus_random(epochs)`, returned by `plus_random`, whose returned `n + "
                                               "std::rand()` " + at("return n + std::rand()") +
                                                   ", which depends on `std::rand()` " + at("return n + std::rand()") +
                                                   ", a random number");
}

// A struct is one value: a member written rank-locally makes all of it rank-local.
TEST_F(RankDependenceTest, StructsCountAsAWhole) {
  EXPECT_FALSE(rankLocal("config from a file"));
  EXPECT_TRUE(rankLocal("struct with a rank-local member"));
}

TEST_F(RankDependenceTest, ParametersAreWhatTheCallsPass) {
  EXPECT_TRUE(rankLocal("int parameter passed a rank-local value"));
  EXPECT_TRUE(rankLocal("float parameter passed a rank-local value"));
  EXPECT_FALSE(rankLocal("float parameter passed uniform values"));
  EXPECT_FALSE(rankLocal("lambda parameter"));
  const CallExpr *value = one("probe", "int parameter passed a rank-local value");
  ASSERT_TRUE(value);
  EXPECT_EQ(ranks_->explain(value->getArg(1)),
            "`value`, a parameter of `report`, passed `index` " + at("report(index, loss") +
                ", computed from `accelerator.process_index()` " + at("const int index = ") +
                ", the process index, which differs between processes");
}

// A statement of a function is reached rank-locally when any call of the function is.
TEST_F(RankDependenceTest, CallersAreFollowed) {
  EXPECT_EQ(markCondition("helper called under a rank-local condition"), "loss.item<float>() < best");
  EXPECT_EQ(condition(save("helper.pt")), "loss.item<float>() < best");
  EXPECT_EQ(markCondition("helper called alike once and rank-locally once"), "loss.item<float>() < best");
  EXPECT_EQ(markCondition("two calls below a rank-local condition"), "loss.item<float>() < best");
  EXPECT_EQ(markCondition("lambda called under a rank-local condition"), "loss.item<float>() < best");
  EXPECT_EQ(markCondition("helper called alike"), "");
  const CallExpr *deep = one("mark", "two calls below a rank-local condition");
  ASSERT_TRUE(deep);
  RankDependence::Reach reach = ranks_->rankLocalReach(*deep);
  ASSERT_EQ(reach.calls.size(), 2u);
  EXPECT_EQ(text(reach.calls[0]), "middle()");
  EXPECT_EQ(text(reach.calls[1]), "deepest()");
  const CallExpr *helper = one("mark", "helper called under a rank-local condition");
  ASSERT_TRUE(helper);
  std::string why = ranks_->explainReach(*helper);
  EXPECT_EQ(why.rfind("under `loss.item<float>() < best` " + at("if (loss.item<float>() < best)") +
                          ", through the call `save_best(model)` " + at("save_best(model);") +
                          ": `loss.item<float>() < best` depends on `loss`",
                      0),
            0u)
      << why;
}

// What a function does alone: conditions, loops, jumps (kept from before the real headers).
TEST_F(RankDependenceTest, ValuesAndConditionsInAFunction) {
  for (const char *uniform : {"epoch", "steps", "int parameter", "bool parameter", "const from a parameter",
                              "stepped from itself"})
    EXPECT_FALSE(rankLocal(uniform)) << uniform;
  for (const char *local :
       {"item", "reward", "best", "float parameter", "address taken", "assigned a rank-local value"})
    EXPECT_TRUE(rankLocal(local)) << local;
  for (const char *reached : {"in a counted loop", "under a uniform if", "in a uniform ?:", "in a uniform switch",
                              "before a rank-local continue", "after a loop with a rank-local break"})
    EXPECT_EQ(markCondition(reached), "") << reached;
  EXPECT_EQ(markCondition("under a rank-local if"), "best > 0");
  EXPECT_EQ(markCondition("under process_index"), "accelerator.process_index() == 0");
  EXPECT_EQ(markCondition("in a tensor while"), "loss.item<float>() > 0");
  EXPECT_EQ(markCondition("right of a rank-local &&"), "reward > 0");
  EXPECT_EQ(markCondition("after a rank-local continue"), "reward > 1");
  EXPECT_EQ(markCondition("before a rank-local break"), "reward > 1");
  EXPECT_EQ(markCondition("after a rank-local return"), "reward > 2");
}

// A rule inserts `val_loss = accelerator.reduce(...)` after the loop: references after it are uniform.
TEST_F(RankDependenceTest, AssumeUniformAfterAPoint) {
  SourceLocation point = endOfLoop("main", "epoch");
  ASSERT_TRUE(point.isValid());
  EXPECT_EQ(markCondition("after the reduce point"), "val_loss < 1.0f");
  EXPECT_TRUE(rankLocal("best from the reduced value"));
  EXPECT_TRUE(rankLocal("tensor aliased before the point"));
  for (const char *name : {"val_loss", "other", "val_total", "counted"}) {
    const VarDecl *var = variable("main", name);
    ASSERT_TRUE(var) << name;
    ranks_->assumeUniformAfter(var, point);
  }
  EXPECT_EQ(markCondition("after the reduce point"), "");
  EXPECT_FALSE(rankLocal("best from the reduced value"));
  EXPECT_TRUE(rankLocal("val_loss in the loop"));              // before the point
  EXPECT_TRUE(rankLocal("rank-local write after the point"));  // `other += random` after it
  // `t = accelerator.reduce(t)` rebinds a tensor: an alias made before cannot change it; an int's
  // pointer still can.
  EXPECT_FALSE(rankLocal("tensor aliased before the point"));
  EXPECT_TRUE(rankLocal("int aliased before the point"));
}

// In a template, the variable of the pattern names it in every instantiation.
TEST_F(RankDependenceTest, AssumeUniformAfterAPointInATemplate) {
  std::vector<const CallExpr *> marks = calls("mark")["template: after the reduced total"];
  ASSERT_EQ(marks.size(), 3u);  // the pattern and two instantiations
  for (const CallExpr *mark : marks) EXPECT_EQ(condition(mark), "total > 1");
  const VarDecl *total = variable("evaluate", "total");
  SourceLocation point = endOfLoop("evaluate", "i");
  ASSERT_TRUE(total && point.isValid());
  ranks_->assumeUniformAfter(total, point);
  for (const CallExpr *mark : marks) EXPECT_EQ(condition(mark), "");
}

}  // namespace

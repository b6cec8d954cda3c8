// save-on-main-process: `torch::save(...);` runs on every process, which then all write the same
// file at once. It becomes
//   accelerator.wait_for_everyone();
//   if (accelerator.is_main_process()) torch::save(...);
// (every process finishes its steps first; one writes), followed by a second
// `accelerator.wait_for_everyone();` where the program reads the file later (a torch::load or an
// input stream of the same path, later in the function, in a loop around both, or in a function it
// calls later: SharedFiles.h), so that no process reads it before the main process has written it.
//
// `torch::save(model, path);` of a model this unit prepares (the fact prepared-models), where every
// process reaches it and nothing reads the path back, becomes `accelerator.save_model(model, path);`:
// every process calls it, the main process writes, all wait (Accelerator::save_model_weights waits
// after the write, and the main process writes its own weights, so no barrier goes before it); under
// FSDP it gathers the shards, which torch::save of one process's module would miss. The path then
// names a directory of safetensors (Accelerate's layout): a note says so and how to load it. A model
// that is read back with torch::load keeps its guarded torch::save (under DDP the main process holds
// the whole model), with a note saying why.
//
// The barrier is a collective: a rank that never reaches it leaves the others waiting until the
// timeout. So where whether (or how often) the save runs depends on a rank-local value (a loss, a
// reward: RankDependence.h), the save is only guarded, and the finding names the lines that make the
// condition the same on every process. If such a save is read later in the same function, the
// barrier goes before the read instead, where every process gets to.
#include "analysis/Analysis.h"
#include "analysis/Matchers.h"
#include "analysis/RankDependence.h"
#include "analysis/TorchTypes.h"
#include "engine/EditText.h"
#include "engine/Migration.h"
#include "rules/SharedFiles.h"

#include <clang/AST/ExprCXX.h>
#include <clang/AST/ParentMapContext.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <map>
#include <memory>
#include <vector>

using namespace clang;
using namespace clang::ast_matchers;
using namespace accmigrate::matchers;

namespace accmigrate {
namespace {

const char *const kBarrier = "accelerator.wait_for_everyone();";

// One save as written, with the calls that are it: a template's pattern and each instantiation.
struct Save {
  struct Seen {
    const CallExpr *call;
    bool fromPattern;  // inTemplatePattern
  };
  std::vector<Seen> seen;
};

// The statement whose condition `condition` is (the `if`, the loop), for "before line N".
const Stmt *conditionOwner(const Expr &condition, ASTContext &ctx) {
  const Stmt *node = &condition;
  for (DynTypedNodeList parents = ctx.getParents(condition); !parents.empty(); parents = ctx.getParents(parents[0])) {
    const Stmt *parent = parents[0].get<Stmt>();
    if (!parent) break;
    if (!isa<Expr>(parent)) return parent;
    node = parent;
  }
  return node;
}

// The line that makes `condition` the same on every process: the rank-local value it tests, reduced
// across processes (a number's or a tensor's mean, an integer's sum: accelerator.reduce keeps a
// number's type) and written back (or into a new variable where it cannot be assigned), or else the
// condition itself, true where any process has it. `test` gets what to test instead, if that changes.
std::string uniformLine(const Expr &condition, RankDependence &ranks, Migration &m, std::string &test) {
  const VarDecl *var = ranks.rankLocalVariable(&condition);
  QualType type = var ? var->getType().getNonReferenceType() : QualType();
  bool tensor = var && isTensor(type);
  if (!tensor && !(var && type->isArithmeticType() && !type->isBooleanType())) {
    test = "save_now";
    return "const bool save_now = accelerator.reduce(static_cast<int>(" + m.text(condition.getSourceRange()) +
           "), \"max\") > 0;";
  }
  std::string name = var->getNameAsString();
  std::string reduced = "accelerator.reduce(" + name + (type->isIntegerType() ? ", \"sum\")" : ", \"mean\")");
  if (!type.isConstQualified()) return name + " = " + reduced + ";";
  test = name + "_all";
  return "const auto " + test + " = " + reduced + ";";
}

// Reports that `condition` keeps some ranks from the save, so no barrier goes before it, with the
// lines that would make it the same on every process.
void reportRankLocalCondition(const Expr &condition, const CallExpr &save, const FileReads::Read &read,
                              bool barrierAtRead, RankDependence &ranks, Migration &m) {
  // Which value makes it differ, and through which calls the save is reached (RankDependence).
  std::string why = ranks.rankLocalReach(save).calls.empty() ? ranks.explain(&condition) : ranks.explainReach(save);
  if (const VarDecl *var = ranks.rankLocalVariable(&condition); why.empty() && var)
    why = "`" + var->getNameAsString() + "` is each process's own";
  if (!why.empty()) why = " (" + why + ")";
  std::string test;
  std::string line = uniformLine(condition, ranks, m, test);
  std::string suggestion = "make it the same on every process: before line " +
                           std::to_string(lineOf(conditionOwner(condition, m.ctx)->getBeginLoc(), m)) + " write `" +
                           line + "`" + (test.empty() ? "" : " and test `" + test + "` instead") + ", then `" +
                           kBarrier + "` before the save on line " + std::to_string(lineOf(save.getBeginLoc(), m));
  if (read.call && !barrierAtRead)
    suggestion += " and after it (line " + std::to_string(lineOf(read.call->getBeginLoc(), m)) + " reads the file)";
  m.report(condition.getBeginLoc(),
           "the save is under `" + m.text(condition.getSourceRange()) + "`, which may differ between processes" + why +
               ": no wait_for_everyone() inserted (it would hang the ranks that do not reach it)",
           suggestion);
}

// `torch::save(model, path)` of a model this unit prepares: the model's variable, else null.
const VarDecl *preparedModel(const CallExpr &call, Migration &m) {
  if (call.getNumArgs() != 2) return nullptr;
  const Expr *path = call.getArg(1)->IgnoreParenImpCasts();
  if (derivesFrom(path->getType()->getAsCXXRecordDecl(), "std::basic_ostream")) return nullptr;  // a stream
  const Expr *model = call.getArg(0)->IgnoreParenImpCasts();
  if (const auto *deref = dyn_cast<UnaryOperator>(model); deref && deref->getOpcode() == UO_Deref)
    model = deref->getSubExpr()->IgnoreParenImpCasts();
  const auto *ref = dyn_cast<DeclRefExpr>(model);
  const auto *var = ref ? dyn_cast<VarDecl>(ref->getDecl()) : nullptr;
  return var && m.isPrepared(var) ? var : nullptr;
}

// "model.pt" for a string literal, else the expression.
std::string pathName(const Expr &path, Migration &m) {
  if (const auto *literal = dyn_cast<StringLiteral>(path.IgnoreParenImpCasts())) return literal->getString().str();
  return m.text(path.getSourceRange());
}

void saveModel(const CallExpr &call, const VarDecl &model, Migration &m) {
  if (!m.replace(call.getCallee()->getSourceRange(), "accelerator.save_model")) return;
  m.useAccelerator(m.enclosingFunction(call));
  const Expr &path = *call.getArg(1);
  std::string name = pathName(path, m);
  bool literal = isa<StringLiteral>(path.IgnoreParenImpCasts());
  std::string python = literal ? "`safetensors.torch.load_file(\"" + name + "/model.safetensors\")`"
                               : "`safetensors.torch.load_file` of the model.safetensors in it";
  m.report(call.getBeginLoc(),
           "torch::save of the prepared model `" + model.getNameAsString() +
               "` becomes accelerator.save_model: every process calls it, the main process writes, all wait (under "
               "FSDP it gathers the shards, which torch::save of one process's model would miss)",
           "`" + name +
               "` is now a directory holding model.safetensors (Accelerate's layout; a file of that name from an "
               "earlier run makes save_model throw): read it back with `acc::load_checkpoint_in_model(" +
               model.getNameAsString() + ", " + m.text(path.getSourceRange()) + ");`, or in Python with " + python,
           Finding::Level::Note);
}

void noteKeptForRead(const CallExpr &call, const VarDecl &model, const FileReads::Read &read, Migration &m) {
  std::string name = model.getNameAsString(), path = m.text(call.getArg(1)->getSourceRange());
  m.report(call.getBeginLoc(),
           "torch::save of the prepared model `" + name + "` kept (not accelerator.save_model): line " +
               std::to_string(lineOf(read.call->getBeginLoc(), m)) + " reads the file back (`" +
               FileReads::describe(*read.call, m) + "`), and save_model writes a directory of safetensors instead",
           "under DDP the main process holds the whole model, so its torch::save is complete; under FSDP save with "
           "`accelerator.save_model(" +
               name + ", " + path + ");` and read with `acc::load_checkpoint_in_model(" + name + ", " + path + ");`",
           Finding::Level::Note);
}

// The statement of a block that holds `e`, or null.
const Stmt *blockStatement(const Stmt &e, ASTContext &ctx) {
  const Stmt *node = &e;
  for (DynTypedNodeList parents = ctx.getParents(e); !parents.empty(); parents = ctx.getParents(parents[0])) {
    if (parents[0].get<CompoundStmt>()) return node;
    node = parents[0].get<Stmt>();
    if (!node || isa<LambdaExpr>(node)) return nullptr;
  }
  return nullptr;
}

void decide(const Save &save, RankDependence &ranks, const FileReads &reads, Migration &m) {
  // The instantiations decide (their types are concrete), the pattern only when there are none.
  const CallExpr *call = nullptr;
  const Expr *rankLocal = nullptr;
  bool instantiated =
      std::any_of(save.seen.begin(), save.seen.end(), [](const Save::Seen &s) { return !s.fromPattern; });
  const VarDecl *model = nullptr;
  for (const Save::Seen &s : save.seen) {
    if (!model) model = preparedModel(*s.call, m);  // the pattern's variable is the one prepare saw
    if (s.fromPattern && instantiated) continue;
    if (!call) call = s.call;
    if (!rankLocal) rankLocal = ranks.rankLocalCondition(*s.call);
  }
  const FunctionDecl *fn = m.enclosingFunction(*call);
  FileReads::Read read = call->getNumArgs() >= 2 ? reads.readAfter(*call, *call->getArg(1), m) : FileReads::Read{};

  if (model && !rankLocal && !read.call) return saveModel(*call, *model, m);

  std::vector<std::string> before, after;
  if (!rankLocal) before.push_back(kBarrier);
  if (!rankLocal && read.call) after.push_back(kBarrier);
  if (!surroundStatement(m, *call, before, kMainProcessGuard, after)) {
    std::string lines;
    for (const std::string &s : before) lines += s + " ";
    lines += kMainProcessGuard + m.text(call->getSourceRange()) + ";";
    for (const std::string &s : after) lines += " " + s;
    m.report(call->getBeginLoc(), "torch::save runs on every process (all of them write the same file)",
             "save on the main process only: `" + lines + "`");
    return;
  }
  m.useAccelerator(fn);
  if (model && read.call && !rankLocal) noteKeptForRead(*call, *model, read, m);
  if (!rankLocal) return;
  // The read, if every process gets to it, waits for the main process's write.
  bool barrierAtRead = false;
  if (read.call && read.sameFunction)
    if (const Stmt *statement = blockStatement(*read.call, m.ctx); statement && !ranks.rankLocalCondition(*statement))
      barrierAtRead =
          m.insert(statement->getBeginLoc(), std::string(kBarrier) + "\n" + lineIndent(statement->getBeginLoc(), m.sm));
  reportRankLocalCondition(*rankLocal, *call, read, barrierAtRead, ranks, m);
}

}  // namespace

void registerSaveOnMainProcess(Migration &m) {
  struct State {
    std::vector<Save> saves;
    std::map<SourceLocation, size_t> index;  // by where the save is written
    std::shared_ptr<FileReads> reads;
  };
  auto state = std::make_shared<State>();
  state->reads = FileReads::collect(m);
  m.onMatch(callExpr(callee(functionDecl(hasName("::torch::save"))), inFunction(functionDecl())).bind("call"),
            [&m, state](const BoundNodes &nodes) {
              const auto *call = nodes.getNodeAs<CallExpr>("call");
              if (underProcessCheck(*call, m)) return;
              auto [it, added] = state->index.emplace(call->getBeginLoc(), state->saves.size());
              if (added) state->saves.emplace_back();
              state->saves[it->second].seen.push_back({call, inTemplatePattern(*call, m.ctx)});
            });
  m.atEnd([&m, state] {
    RankDependence ranks = sharedFileRanks(m);
    for (const Save &save : state->saves) decide(save, ranks, *state->reads, m);
  });
}

}  // namespace accmigrate

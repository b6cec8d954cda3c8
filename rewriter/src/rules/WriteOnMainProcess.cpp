// write-on-main-process: the files every training program writes besides its checkpoints (metrics,
// CSV, logs) are written by every process at once, each a whole copy over the others'. The main
// process becomes the one writer:
//   std::ofstream csv("metrics.csv", std::ios::app);
// becomes
//   std::ofstream csv;
//   if (accelerator.is_main_process()) csv.open("metrics.csv", std::ios::app);
// where `csv` is a local whose every other use writes (`<<`, write, put, flush, close, formatting, or
// passing it as a std::ostream& to a project function whose uses of it write): a stream that is not
// open ignores writes, so every process runs the same code and one writes. `csv.open(...);` of such
// a local is guarded the same way. A stream that is tested (`if (!csv)`, is_open(), good()...: an
// unopened stream fails the test), used otherwise, or whose file the program reads back later is
// reported with the lines to write instead.
//   std::filesystem::create_directories(p);   (or create_directory)
// becomes
//   if (accelerator.is_main_process()) std::filesystem::create_directories(p);
//   accelerator.wait_for_everyone();
// the barrier where every process reaches it (RankDependence.h), since the others may use the
// directory next; under a rank-local condition the call is only guarded, and the finding says what
// the barrier needs.
// Code already under is_main_process()/process_index() is left alone, and so is migrated code. Every
// function of the project is rewritten, as save-on-main-process does: a helper that writes a CSV is
// run by every process, wherever it is called from. What it rewrote or reported is the fact
// handled-writes, so that every-rank-side-effect does not report it again.
#include "analysis/Analysis.h"
#include "analysis/Matchers.h"
#include "analysis/RankDependence.h"
#include "analysis/TorchTypes.h"
#include "engine/EditText.h"
#include "engine/Migration.h"
#include "rules/SharedFiles.h"

#include <clang/AST/ExprCXX.h>
#include <clang/AST/ParentMapContext.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <llvm/ADT/StringSwitch.h>
#include <map>
#include <memory>
#include <vector>

using namespace clang;
using namespace clang::ast_matchers;
using namespace accmigrate::matchers;

namespace accmigrate {
namespace {

const char *const kBarrier = "accelerator.wait_for_everyone();";

// What a use of an output stream does.
enum class UseKind { Write, Open, Test, Other };
struct Use {
  UseKind kind;
  const Expr *at;  // the use as a whole: the call, the operator
};

// Member functions of an output stream that write or format, which a stream that is not open
// ignores; those that test its state, which it fails; open.
UseKind memberUse(StringRef name) {
  return llvm::StringSwitch<UseKind>(name)
      .Cases("write", "put", "flush", "close", UseKind::Write)
      .Cases("precision", "setf", "unsetf", "width", "fill", UseKind::Write)
      .Case("open", UseKind::Open)
      .Cases("is_open", "good", "fail", "bad", "eof", UseKind::Test)
      .Cases("rdstate", "operator bool", "operator!", "tellp", UseKind::Test)
      .Default(UseKind::Other);
}

bool isOutputStreamReference(QualType type) {
  if (!type->isLValueReferenceType()) return false;
  QualType pointee = type->getPointeeType();
  return !pointee.isConstQualified() && derivesFrom(pointee->getAsCXXRecordDecl(), "std::basic_ostream");
}

struct References : RecursiveASTVisitor<References> {
  const ValueDecl *target;
  std::vector<const DeclRefExpr *> found;
  bool VisitDeclRefExpr(DeclRefExpr *ref) {
    if (ref->getDecl() == target) found.push_back(ref);
    return true;
  }
};

std::vector<const DeclRefExpr *> referencesTo(const ValueDecl *var, const Stmt *scope) {
  References refs;
  refs.target = var;
  refs.TraverseStmt(const_cast<Stmt *>(scope));
  return refs.found;
}

Use classify(const DeclRefExpr &ref, ASTContext &ctx, Migration &m, int depth);

// `stream` is the argument of `call` for a project function's `std::ostream&` parameter, and every
// use of that parameter in the function's body writes.
bool passedToWriter(const CallExpr &call, const Expr &stream, ASTContext &ctx, Migration &m, int depth) {
  const FunctionDecl *callee = call.getDirectCallee();
  if (!callee || depth > 2 || !m.inProject(callee->getLocation())) return false;
  unsigned offset = isa<CXXOperatorCallExpr>(call) && isa<CXXMethodDecl>(callee) ? 1 : 0;
  for (unsigned i = 0; i < call.getNumArgs(); ++i) {
    if (call.getArg(i)->IgnoreParenImpCasts() != &stream) continue;
    if (i < offset || i - offset >= callee->getNumParams()) return false;
    const ParmVarDecl *param = callee->getParamDecl(i - offset);
    const FunctionDecl *definition = nullptr;
    if (!isOutputStreamReference(param->getType()) || !callee->hasBody(definition)) return false;
    param = definition->getParamDecl(i - offset);
    for (const DeclRefExpr *use : referencesTo(param, definition->getBody()))
      if (classify(*use, ctx, m, depth + 1).kind != UseKind::Write) return false;
    return true;
  }
  return false;
}

// What the use `ref` of an output stream does.
Use classify(const DeclRefExpr &ref, ASTContext &ctx, Migration &m, int depth) {
  const Expr *top = &ref;
  DynTypedNodeList parents = ctx.getParents(ref);
  while (!parents.empty() && parents[0].get<Expr>() && isa<ImplicitCastExpr, ParenExpr>(parents[0].get<Expr>())) {
    top = parents[0].get<Expr>();
    parents = ctx.getParents(*top);
  }
  if (parents.empty()) return {UseKind::Other, top};
  const DynTypedNode &parent = parents[0];
  auto isStream = [&](const Expr *e) { return e && e->IgnoreParenImpCasts() == &ref; };
  if (const auto *op = parent.get<CXXOperatorCallExpr>()) {
    if (op->getOperator() == OO_LessLess && op->getNumArgs() == 2 && isStream(op->getArg(0)))
      return {UseKind::Write, op};
    if (op->getOperator() == OO_Exclaim) return {UseKind::Test, op};
    if (op->getOperator() != OO_LessLess && passedToWriter(*op, ref, ctx, m, depth)) return {UseKind::Write, op};
    return {UseKind::Other, op};
  }
  if (const auto *op = parent.get<BinaryOperator>())  // a template's `out << value` with a dependent value
    return {op->getOpcode() == BO_Shl && isStream(op->getLHS()) ? UseKind::Write : UseKind::Other, op};
  StringRef member;
  const Expr *memberExpr = nullptr;
  if (const auto *e = parent.get<MemberExpr>()) {
    memberExpr = e;
    if (const auto *method = dyn_cast<CXXMethodDecl>(e->getMemberDecl())) {
      if (const auto *conversion = dyn_cast<CXXConversionDecl>(method))
        member = conversion->getConversionType()->isBooleanType() ? "operator bool" : "";
      else if (method->getIdentifier())
        member = method->getName();
    }
  } else if (const auto *e = parent.get<UnresolvedMemberExpr>()) {
    memberExpr = e;
    if (e->getMemberName().isIdentifier()) member = e->getMemberName().getAsIdentifierInfo()->getName();
  } else if (const auto *e = parent.get<CXXDependentScopeMemberExpr>()) {
    memberExpr = e;
    if (e->getMember().isIdentifier()) member = e->getMember().getAsIdentifierInfo()->getName();
  }
  if (memberExpr) {
    DynTypedNodeList callers = ctx.getParents(*memberExpr);
    const auto *call = callers.empty() ? nullptr : callers[0].get<CallExpr>();
    if (!call || call->getCallee()->IgnoreParenImpCasts() != memberExpr) return {UseKind::Other, memberExpr};
    return {memberUse(member), call};
  }
  if (const auto *call = parent.get<CallExpr>())
    return {passedToWriter(*call, ref, ctx, m, depth) ? UseKind::Write : UseKind::Other, call};
  return {UseKind::Other, top};
}

// A local output stream, the way one declaration (and each of a template's instantiations) shows it.
struct Stream {
  const VarDecl *var;
  const DeclStmt *decl;
  const CXXConstructExpr *opening;  // the declaration's `(path, mode)`, or null (`std::ofstream f;`)
  std::vector<Use> uses;            // every other use, opens included
};

// Why a stream cannot be rewritten, with where and what to write instead; empty when it can.
struct Obstacle {
  const Expr *at = nullptr;
  std::string problem, fix;
};

// A test of a stream only the main process opens: where it decides an `if` without an else, that if
// runs on the main process only.
std::string fixTest(const Use &use, Migration &m) {
  const Stmt *node = use.at;
  for (DynTypedNodeList parents = m.ctx.getParents(*use.at); !parents.empty(); parents = m.ctx.getParents(parents[0])) {
    if (const auto *ifStmt = parents[0].get<IfStmt>()) {
      if (ifStmt->getCond() != node || ifStmt->getElse()) break;
      const Expr *cond = ifStmt->getCond()->IgnoreParenImpCasts();
      bool low = false;  // an operator that binds less tightly than &&
      if (const auto *op = dyn_cast<BinaryOperator>(cond))
        low = op->getOpcode() == BO_LOr || op->isAssignmentOp() || op->getOpcode() == BO_Comma;
      if (const auto *op = dyn_cast<CXXOperatorCallExpr>(cond))
        low = op->getOperator() == OO_PipePipe || op->getOperator() == OO_Equal || op->getOperator() == OO_Comma;
      std::string text = m.text(ifStmt->getCond()->getSourceRange());
      return "`if (accelerator.is_main_process() && " +
             (low || isa<ConditionalOperator>(cond) ? "(" + text + ")" : text) + ")` on line " +
             std::to_string(lineOf(ifStmt->getBeginLoc(), m));
    }
    const Stmt *parent = parents[0].get<Stmt>();
    if (!parent || !isa<Expr>(parent)) break;
    node = parent;
  }
  return "a test on line " + std::to_string(lineOf(use.at->getBeginLoc(), m)) +
         " that holds on the main process only (`accelerator.is_main_process() && ...`)";
}

// The end of `s`'s block, where the stream is destroyed (and closed), or its close() if it has one.
std::string whereClosed(const Stream &s, Migration &m) {
  for (const Use &use : s.uses)
    if (const auto *call = dyn_cast<CXXMemberCallExpr>(use.at))
      if (call->getMethodDecl() && call->getMethodDecl()->getName() == "close")
        return "after line " + std::to_string(lineOf(call->getBeginLoc(), m)) + "'s close()";
  if (const CompoundStmt *block = parentBlock(*s.decl, m.ctx))
    return "after the block that ends on line " + std::to_string(lineOf(block->getRBracLoc(), m)) + " (where `" +
           s.var->getNameAsString() + "` is closed)";
  return "once `" + s.var->getNameAsString() + "` is closed";
}

Obstacle obstacle(const Stream &s, const FileReads &reads, Migration &m) {
  std::string name = s.var->getNameAsString();
  for (const Use &use : s.uses) {
    unsigned line = lineOf(use.at->getBeginLoc(), m);
    std::string text = m.text(use.at->getSourceRange());
    if (use.kind == UseKind::Test)
      return {use.at,
              "line " + std::to_string(line) + " tests it (`" + text +
                  "`), which a stream the other processes do not open fails",
              "; then make the test " + fixTest(use, m)};
    if (use.kind == UseKind::Other)
      return {use.at, "line " + std::to_string(line) + " does more with it than write (`" + text + "`)",
              "; then run line " + std::to_string(line) + " on the main process only (`" + kMainProcessGuard + "`)"};
    if (use.kind == UseKind::Open && statementPlace(*use.at, m.ctx) == StatementPlace::None)
      return {use.at, "line " + std::to_string(line) + " opens it inside an expression (`" + text + "`)", ""};
  }
  // Each path it opens, read back later by the program: the other processes would read it before
  // the main process has written it.
  std::vector<std::pair<const Stmt *, const Expr *>> paths;
  if (s.opening && s.opening->getNumArgs()) paths.push_back({s.decl, s.opening->getArg(0)});
  for (const Use &use : s.uses)
    if (const auto *call = dyn_cast<CallExpr>(use.at); use.kind == UseKind::Open && call && call->getNumArgs())
      paths.push_back({call, call->getArg(0)});
  for (auto [at, path] : paths)
    if (FileReads::Read read = reads.readAfter(*at, *path, m); read.call) {
      unsigned line = lineOf(read.call->getBeginLoc(), m);
      return {read.call,
              "line " + std::to_string(line) + " reads the file back (`" + FileReads::describe(*read.call, m) +
                  "`), and the other processes would read it before the main process has written it",
              "; then write `" + std::string(kBarrier) + "` " + whereClosed(s, m) + ", before line " +
                  std::to_string(line)};
    }
  return {};
}

// What to write instead of the stream's opening: the declaration without its arguments and the
// guarded open, or the guarded opens.
std::string openOnMain(const Stream &s, Migration &m) {
  std::string name = s.var->getNameAsString();
  if (s.opening)
    return "`" + declaredText(*s.var, m) + ";` and `" + kMainProcessGuard + name + ".open(" +
           argumentsText(*s.opening, m) + ");`";
  std::string lines;
  for (const Use &use : s.uses)
    if (use.kind == UseKind::Open && !underProcessCheck(*use.at, m))
      lines += std::string(lines.empty() ? "" : ", ") + "`" + kMainProcessGuard + m.text(use.at->getSourceRange()) +
               ";` on line " + std::to_string(lineOf(use.at->getBeginLoc(), m));
  return lines;
}

// Rewrites one stream (every instantiation agreeing), or reports what stops it.
void decideStream(const std::vector<Stream> &seen, const FileReads &reads, Migration &m) {
  const Stream &s = seen.front();
  std::vector<const Expr *> opens;  // not yet guarded
  if (s.opening && !underProcessCheck(*s.decl, m)) opens.push_back(s.opening);
  for (const Use &use : s.uses)
    if (use.kind == UseKind::Open && !underProcessCheck(*use.at, m)) opens.push_back(use.at);
  if (opens.empty() || (s.opening && underProcessCheck(*s.decl, m))) return;  // no file, or the author's choice
  for (const Expr *open : opens) m.noteHandledWrite(open->getBeginLoc());

  Obstacle why;
  for (const Stream &instance : seen)
    if (why.problem.empty()) why = obstacle(instance, reads, m);
  std::string name = s.var->getNameAsString();
  if (!why.problem.empty()) {
    m.report(opens.front()->getBeginLoc(),
             "`" + name + "` writes a file on every process (all of them write the same file), and " + why.problem +
                 ": not rewritten",
             "open it on the main process only: " + openOnMain(s, m) + why.fix);
    return;
  }
  const FunctionDecl *fn = m.enclosingFunction(*s.decl);
  if (s.opening && !underProcessCheck(*s.decl, m)) {
    SourceRange parens = s.opening->getParenOrBraceRange();
    std::string open = std::string(kMainProcessGuard) + name + ".open(" + argumentsText(*s.opening, m) + ");";
    if (!m.remove(CharSourceRange::getCharRange(afterToken(s.var->getLocation(), m.sm, m.lang),
                                                afterToken(parens.getEnd(), m.sm, m.lang))))
      return;
    m.insert(statementRange(s.decl, m.sm, m.lang).getEnd(), "\n" + lineIndent(s.decl->getBeginLoc(), m.sm) + open);
  }
  for (const Use &use : s.uses)
    if (use.kind == UseKind::Open && !underProcessCheck(*use.at, m))
      surroundStatement(m, *use.at, {}, kMainProcessGuard, {});
  m.useAccelerator(fn);
}

// One create_directories/create_directory call as written, with its instantiations.
struct Create {
  std::vector<std::pair<const CallExpr *, bool>> seen;  // the call, whether in a template's pattern
};

void decideCreate(const Create &create, RankDependence &ranks, Migration &m) {
  bool instantiated = std::any_of(create.seen.begin(), create.seen.end(), [](const auto &s) { return !s.second; });
  const CallExpr *call = nullptr;
  const Expr *rankLocal = nullptr;
  for (auto [c, fromPattern] : create.seen) {
    if (fromPattern && instantiated) continue;
    if (!call) call = c;
    if (!rankLocal) rankLocal = ranks.rankLocalCondition(*c);
  }
  std::vector<std::string> after;
  if (!rankLocal) after.push_back(kBarrier);
  if (!surroundStatement(m, *call, {}, kMainProcessGuard, after)) return;  // its value is used: reported elsewhere
  m.noteHandledWrite(call->getBeginLoc());
  m.useAccelerator(m.enclosingFunction(*call));
  if (rankLocal)
    m.report(rankLocal->getBeginLoc(),
             "the directory is created under `" + m.text(rankLocal->getSourceRange()) +
                 "`, which may differ between processes: created on the main process only, with no "
                 "wait_for_everyone() after it (it would hang the ranks that do not reach it)",
             "if other processes use the directory next, make the condition the same on every process and write `" +
                 std::string(kBarrier) + "` after line " + std::to_string(lineOf(call->getBeginLoc(), m)));
}

}  // namespace

void registerWriteOnMainProcess(Migration &m) {
  struct State {
    std::map<SourceLocation, std::vector<Stream>> streams;  // by declaration: a template's and its instantiations'
    std::map<SourceLocation, Create> creates;
    std::shared_ptr<FileReads> reads;
  };
  auto state = std::make_shared<State>();
  state->reads = FileReads::collect(m);

  auto ofstream = cxxRecordDecl(hasName("::std::basic_ofstream"));
  auto stream = varDecl(hasLocalStorage(), unless(parmVarDecl()),
                        hasType(hasUnqualifiedDesugaredType(recordType(hasDeclaration(ofstream)))))
                    .bind("var");
  m.onMatch(declStmt(hasSingleDecl(stream), hasParent(compoundStmt()), inFunction(functionDecl())).bind("decl"),
            [&m, state](const BoundNodes &nodes) {
              Stream s{nodes.getNodeAs<VarDecl>("var"), nodes.getNodeAs<DeclStmt>("decl"), nullptr, {}};
              const Expr *init = s.var->getInit();
              const auto *construct = init ? dyn_cast<CXXConstructExpr>(init->IgnoreImplicit()) : nullptr;
              if (construct && construct->getNumArgs() &&
                  (s.var->getInitStyle() == VarDecl::CallInit || s.var->getInitStyle() == VarDecl::ListInit))
                s.opening = construct;
              else if (init && !(construct && construct->getNumArgs() == 0))
                return;  // `= std::ofstream(path)`: every-rank-side-effect reports the construction
              const auto *block = cast<CompoundStmt>(m.ctx.getParents(*s.decl)[0].get<Stmt>());
              for (const DeclRefExpr *ref : referencesTo(s.var, block)) s.uses.push_back(classify(*ref, m.ctx, m, 0));
              state->streams[s.decl->getBeginLoc()].push_back(std::move(s));
            });
  auto create = functionDecl(matchesName("^::std::(__fs::)?filesystem::(.*::)?create_director(y|ies)$"));
  m.onMatch(callExpr(callee(create), inFunction(functionDecl())).bind("create"), [&m, state](const BoundNodes &nodes) {
    const auto *call = nodes.getNodeAs<CallExpr>("create");
    if (underProcessCheck(*call, m)) return;
    state->creates[call->getBeginLoc()].seen.push_back({call, inTemplatePattern(*call, m.ctx)});
  });
  m.atEnd([&m, state] {
    for (const auto &[at, seen] : state->streams) decideStream(seen, *state->reads, m);
    RankDependence ranks = sharedFileRanks(m);
    for (const auto &[at, create] : state->creates) decideCreate(create, ranks, m);
  });
}

}  // namespace accmigrate

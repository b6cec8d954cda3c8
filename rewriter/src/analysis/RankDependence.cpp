// RankDependence's API, which statements every rank reaches (conditions, jumps, callers), and the
// explanations findings print. See RankDependenceImpl.h for the other parts.
#include "analysis/RankDependence.h"

#include "analysis/RankDependenceImpl.h"
#include "analysis/TorchTypes.h"

#include <clang/AST/ParentMapContext.h>
#include <clang/AST/StmtCXX.h>
#include <clang/Lex/Lexer.h>

namespace accmigrate {

using namespace rankdep;

const FunctionDecl *RankDependence::Impl::functionAround(const Stmt &s) {
  for (DynTypedNodeList parents = ctx_.getParents(s); !parents.empty(); parents = ctx_.getParents(parents[0])) {
    if (const auto *fn = parents[0].get<FunctionDecl>()) return fn;
    if (const auto *lambda = parents[0].get<LambdaExpr>()) return lambda->getCallOperator();
  }
  return nullptr;
}

const Expr *RankDependence::Impl::enclosingCondition(const Stmt &s, const Stmt **body, DynTypedNode *boundary) {
  *body = nullptr;
  DynTypedNode child = DynTypedNode::create(s);
  for (DynTypedNodeList parents = ctx_.getParents(s); !parents.empty(); parents = ctx_.getParents(parents[0])) {
    const DynTypedNode &parent = parents[0];
    if (parent.get<FunctionDecl>() || parent.get<LambdaExpr>()) {
      *body = child.get<Stmt>();
      *boundary = parent;
      return nullptr;
    }
    const Stmt *from = child.get<Stmt>();
    child = parent;
    const Expr *condition = nullptr;
    if (const auto *ifStmt = parent.get<IfStmt>()) {
      if (!ifStmt->isConstexpr() && (from == ifStmt->getThen() || from == ifStmt->getElse()))
        condition = ifStmt->getCond();
    } else if (const auto *loop = parent.get<WhileStmt>()) {
      if (from == loop->getBody()) condition = loop->getCond();
    } else if (const auto *loop = parent.get<DoStmt>()) {
      if (from == loop->getBody()) condition = loop->getCond();
    } else if (const auto *loop = parent.get<ForStmt>()) {
      if (from == loop->getBody() || from == loop->getInc()) condition = loop->getCond();
    } else if (const auto *loop = parent.get<CXXForRangeStmt>()) {
      // A prepared loader gives every process the same number of batches.
      const Expr *range = loop->getRangeInit();
      if (from == loop->getBody() && range && !isDataLoader(range->getType())) condition = range;
    } else if (const auto *switchStmt = parent.get<SwitchStmt>()) {
      if (from == switchStmt->getBody()) condition = switchStmt->getCond();
    } else if (const auto *choice = parent.get<AbstractConditionalOperator>()) {
      if (from == choice->getTrueExpr() || from == choice->getFalseExpr()) condition = choice->getCond();
    } else if (const auto *op = parent.get<BinaryOperator>()) {
      if (op->isLogicalOp() && from == op->getRHS()) condition = op->getLHS();
    }
    Culprit ignored;
    if (condition && culprit(condition, Mode{}, ignored)) return condition;
  }
  return nullptr;
}

bool RankDependence::Impl::encloses(const Stmt &outer, const Stmt &inner) {
  for (DynTypedNodeList parents = ctx_.getParents(inner); !parents.empty(); parents = ctx_.getParents(parents[0]))
    if (parents[0].get<Stmt>() == &outer) return true;
  return false;
}

namespace {

// The jumps of a function body (not of the lambdas in it), each with what it leaves: the loop or
// switch a break ends, the loop a continue restarts, the outermost loop a return/goto/throw leaves
// (null outside loops).
struct Jump {
  const Stmt *jump;
  const Stmt *leaves;
  bool restartsOnly;  // a continue: it skips what follows it in the iteration, not later iterations
};

void collectJumps(const Stmt *s, std::vector<const Stmt *> &enclosing, std::vector<Jump> &jumps) {
  if (!s || isa<LambdaExpr>(s)) return;
  auto innermost = [&](bool switches) -> const Stmt * {
    for (auto it = enclosing.rbegin(); it != enclosing.rend(); ++it)
      if (switches || !isa<SwitchStmt>(*it)) return *it;
    return nullptr;
  };
  if (isa<BreakStmt>(s)) jumps.push_back({s, innermost(true), false});
  if (isa<ContinueStmt>(s)) jumps.push_back({s, innermost(false), true});
  if (isa<ReturnStmt, GotoStmt, IndirectGotoStmt, CXXThrowExpr>(s)) {
    const Stmt *outermostLoop = nullptr;
    for (const Stmt *e : enclosing)
      if (!isa<SwitchStmt>(e)) {
        outermostLoop = e;
        break;
      }
    jumps.push_back({s, outermostLoop, false});
  }
  bool scope = isa<ForStmt, WhileStmt, DoStmt, CXXForRangeStmt, SwitchStmt>(s);
  if (scope) enclosing.push_back(s);
  for (const Stmt *child : s->children()) collectJumps(child, enclosing, jumps);
  if (scope) enclosing.pop_back();
}

}  // namespace

const Expr *RankDependence::Impl::jumpCondition(const Stmt &s, const Stmt &body) {
  std::vector<const Stmt *> enclosing;
  std::vector<Jump> jumps;
  collectJumps(&body, enclosing, jumps);
  for (const Jump &j : jumps) {
    bool before = sm_.isBeforeInTranslationUnit(j.jump->getBeginLoc(), s.getBeginLoc());
    bool leavesLoopAroundS = j.leaves && encloses(*j.leaves, s);
    // A break/return that ends a loop around `s` changes how often it runs wherever it is; a
    // continue, or a return outside such loops, skips it when it comes first.
    bool skips = isa<BreakStmt>(j.jump) ? leavesLoopAroundS
                 : j.restartsOnly       ? leavesLoopAroundS && before
                                        : before || leavesLoopAroundS;
    if (!skips) continue;
    const Stmt *ignored;
    DynTypedNode boundary;
    if (const Expr *condition = enclosingCondition(*j.jump, &ignored, &boundary)) return condition;
  }
  return nullptr;
}

// The rank-local condition deciding `s` in its function, else in any caller: a function (a lambda)
// whose statement is reached alike on every rank by one call may not be by another, and a
// collective in it must be reached alike by all. Each function once per question (`seen`), at
// most kMaxCallerDepth calls up.
RankDependence::Reach RankDependence::Impl::reach(const Stmt &s, std::set<const void *> &seen, int depth) {
  constexpr int kMaxCallerDepth = 16;
  const Stmt *body = nullptr;
  DynTypedNode boundary;
  if (const Expr *condition = enclosingCondition(s, &body, &boundary)) return {condition, {}};
  if (!body) return {};
  if (const Expr *condition = jumpCondition(s, *body)) return {condition, {}};
  if (depth >= kMaxCallerDepth) return {};
  std::vector<const Expr *> sites;
  if (const auto *lambda = boundary.get<LambdaExpr>()) {
    if (!seen.insert(lambda).second) return {};
    sites = callSites(lambda->getCallOperator());
    sites.push_back(lambda);  // where it is made: a lambda made under a condition runs under it
  } else if (const auto *fn = boundary.get<FunctionDecl>()) {
    if (!seen.insert(functionKey(fn)).second) return {};
    sites = callSites(fn);
  }
  for (const Expr *site : sites) {
    Reach r = reach(*site, seen, depth + 1);
    if (r.condition) {
      r.calls.push_back(site);
      return r;
    }
  }
  return {};
}

RankDependence::Reach RankDependence::Impl::reach(const Stmt &s) {
  std::set<const void *> seen;
  return reach(s, seen, 0);
}

std::string RankDependence::Impl::text(const Stmt *s) const {
  if (!s) return "";
  CharSourceRange range = CharSourceRange::getTokenRange(sm_.getExpansionRange(s->getSourceRange()).getAsRange());
  std::string t = Lexer::getSourceText(range, sm_, ctx_.getLangOpts()).str();
  std::string flat;
  for (char ch : t) {  // one line: runs of whitespace become one space
    bool space = ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r';
    if (space && (flat.empty() || flat.back() == ' ')) continue;
    flat += space ? ' ' : ch;
  }
  if (flat.size() > 60) flat = flat.substr(0, 57) + "...";
  return flat;
}

namespace {
// "`train`", "a lambda".
std::string functionName(const DeclContext *dc) {
  const auto *fn = dyn_cast<FunctionDecl>(dc);
  if (!fn) return "a function";
  return isLambdaOperator(fn) ? "a lambda" : "`" + nameOf(fn) + "`";
}

std::string phrase(const Culprit &c) {
  switch (c.why) {
    case Why::Variable:
      return "";
    case Why::Tensor:
      return "a tensor, which differs between processes";
    case Why::ProcessIndex:
      return "the process index, which differs between processes";
    case Why::OneProcess:
      return "true on one process only";
    case Why::Accelerator:
      return "a value of this process's accelerator";
    case Why::LaunchVariable:
      return "the launch variable " + c.detail + ", which differs between processes";
    case Why::DynamicGetenv:
      return "an environment variable whose name is not a literal";
    case Why::Batch:
      return "a batch of the data loader, which differs between processes";
    case Why::Random:
      return "a random number";
    case Why::Time:
      return "the time";
    case Why::Thread:
      return "a property of the thread";
    case Why::FileSystem:
      return "the file system's state, which another process may change";
    case Why::Stdin:
      return "standard input, which launchers give to one process only";
    case Why::FileAfterTraining:
      return "read from a file after " + c.detail + ": another process may have written it";
    case Why::Address:
      return "an address, which differs between processes";
    case Why::Global:
      return "a global variable that is not a constant";
    case Why::ThisMember:
      return "a member of the object, which acc-migrate does not follow here";
    case Why::ProjectCall:
      return "returned by " + c.detail;
    case Why::UnknownCall:
      return "the result of " + c.detail + ", which acc-migrate does not follow";
    case Why::Recursion:
      return "a recursive call, which acc-migrate does not follow";
    case Why::Doubt:
      return "which acc-migrate cannot show to be the same on every process";
  }
  return "";
}
}  // namespace

std::string RankDependence::Impl::explain(const Expr *e, Mode m) {
  // A culprit spelled as `e` (`e` without its conversions and temporaries) needs no "depends on".
  auto same = [](const Expr *a, const Expr *b) { return a == b || a->getSourceRange() == b->getSourceRange(); };
  Culprit c;
  if (!e || !culprit(e, m, c)) return "";
  std::string out = "`" + text(e) + "`";
  auto at = [this](const Stmt *s) { return " (line " + std::to_string(line(s->getBeginLoc())) + ")"; };
  std::set<const VarDecl *> seen;
  std::string dependsOn = " depends on ";
  // Each step: `c` is what makes `e` rank-local in mode `m`.
  for (int step = 0; step < 8; ++step) {
    if (step > 0) dependsOn = ", which depends on ";
    if (c.why != Why::Variable) {
      if (!same(c.expr, e)) out += dependsOn + "`" + text(c.expr) + "`" + at(c.expr);
      out += ", " + phrase(c);
      if (c.why != Why::ProjectCall || !c.next) return out;
      out += ", whose returned `" + text(c.next) + "`" + at(c.next);
      e = c.next;
      m = c.nextMode;
      if (!culprit(e, m, c)) return out;
      continue;
    }
    const auto *ref = dyn_cast<DeclRefExpr>(c.expr);
    const auto *me = dyn_cast<MemberExpr>(c.expr);
    const VarDecl *var = ref  ? dyn_cast<VarDecl>(ref->getDecl())
                         : me ? dyn_cast<VarDecl>(me->getMemberDecl())
                              : nullptr;
    if (!var || !seen.insert(var).second) return out;
    if (!same(c.expr, e)) out += dependsOn + "`" + var->getNameAsString() + "`";
    if (!outerFunction(var)) {
      bool input = var->getName() == "cin" || var->getName() == "wcin";
      Culprit global;
      global.why = input ? Why::Stdin : Why::Global;
      return out + ", " + phrase(global);
    }
    std::optional<Cause> cause = variableCause(var, m);
    if (!cause) return out;
    switch (cause->kind) {
      case Cause::Write: {
        const Write &w = *cause->write;
        if (w.kind == Write::Escape) {
          // The expression through which it escapes: `&x`, `f(x)`, `model->forward(x)`.
          const Expr *user = w.expr;
          for (int up = 0; up < 8; ++up) {
            auto parents = ctx_.getParents(*user);
            const auto *parent = parents.empty() ? nullptr : parents[0].get<Expr>();
            if (!parent) break;
            const auto *op = dyn_cast<CXXOperatorCallExpr>(user);
            bool path = isa<MemberExpr, ImplicitCastExpr, ParenExpr>(user) || (op && op->getOperator() == OO_Arrow);
            if (!path && user != w.expr) break;
            user = parent;
          }
          return out + ", whose writes acc-migrate cannot follow (`" + text(user) + "`" + at(user) + " may change it)";
        }
        if (w.kind == Write::OutArgument) return out + ", written by `" + text(w.expr) + "`" + at(w.expr);
        out += (w.kind == Write::Element ? ", an element of `" : ", computed from `") + text(w.expr) + "`" + at(w.expr);
        e = w.expr;
        m = cause->mode;
        if (!writeRankLocal(w, m, c)) return out;
        if (w.kind == Write::Element && c.why == Why::Batch) return out + ", " + phrase(c);
        continue;
      }
      case Cause::Argument:
        out += ", a parameter of " + functionName(var->getDeclContext());
        if (!cause->argument) return out + " called without it";
        out += ", passed `" + text(cause->argument) + "`" + at(cause->argument);
        e = cause->argument;
        m = cause->mode;
        if (!culprit(e, m, c)) return out;
        continue;
      case Cause::ParameterType:
        return out + ", a parameter of " + functionName(var->getDeclContext()) +
               " whose callers acc-migrate does not see (only integral, bool and enum parameters are taken as the "
               "same on every process)";
      case Cause::LambdaParameter:
        return out + ", a parameter of a lambda that is not called directly";
      case Cause::Assumed:
        return out + ", a parameter given a value that differs between processes";
      case Cause::Recursion:
        return out + ", which acc-migrate does not follow (recursion)";
    }
  }
  return out;
}

void RankDependence::Impl::assume(const VarDecl *var, SourceLocation point) {
  assumptions_.push_back({var->getLocation(), var->getNameAsString(), point});
  // What was computed may have counted references after the point as rank-local.
  locals_.clear();
  summaries_.clear();
}

RankDependence::RankDependence(ASTContext &ctx, OtherFiles otherFiles)
    : impl_(std::make_unique<Impl>(ctx, otherFiles)) {}
RankDependence::RankDependence(RankDependence &&) noexcept = default;
RankDependence::~RankDependence() = default;

bool RankDependence::isRankLocal(const Expr *e) {
  Culprit c;
  return impl_->culprit(e, Mode{}, c);
}

const VarDecl *RankDependence::rankLocalVariable(const Expr *e) {
  Culprit c;
  if (!impl_->culprit(e, Mode{}, c) || c.why != Why::Variable) return nullptr;
  if (const auto *ref = dyn_cast<DeclRefExpr>(c.expr)) return dyn_cast<VarDecl>(ref->getDecl());
  if (const auto *me = dyn_cast<MemberExpr>(c.expr)) return dyn_cast<VarDecl>(me->getMemberDecl());
  return nullptr;
}

std::string RankDependence::explain(const Expr *e) { return impl_->explain(e, Mode{}); }

const Expr *RankDependence::rankLocalCondition(const Stmt &s) { return impl_->reach(s).condition; }

RankDependence::Reach RankDependence::rankLocalReach(const Stmt &s) { return impl_->reach(s); }

std::string RankDependence::explainReach(const Stmt &s) {
  Reach r = impl_->reach(s);
  if (!r.condition) return "";
  auto at = [this](const Stmt *node) { return " (line " + std::to_string(impl_->line(node->getBeginLoc())) + ")"; };
  std::string where = "under `" + impl_->text(r.condition) + "`" + at(r.condition);
  for (size_t i = 0; i < r.calls.size(); ++i)
    where += (i == 0 ? (r.calls.size() == 1 ? ", through the call `" : ", through the calls `") : ", `") +
             impl_->text(r.calls[i]) + "`" + at(r.calls[i]);
  return where + ": " + impl_->explain(r.condition, Mode{});
}

bool RankDependence::returnsUniformWhateverArguments(const FunctionDecl *def) {
  return impl_->returnsUniformWhateverArguments(def);
}

std::string RankDependence::crossFileKey(const FunctionDecl *fn) {
  if (!fn || fn->isMain() || fn->isTemplated() || fn->isTemplateInstantiation() || !fn->isExternallyVisible())
    return "";
  return fn->getQualifiedNameAsString() + " " + fn->getType().getCanonicalType().getAsString();
}

void RankDependence::assumeUniformAfter(const VarDecl *var, SourceLocation point) { impl_->assume(var, point); }

bool RankDependence::isPerProcessVariable(StringRef name) {
  std::string upper = name.upper();
  for (const char *part : {"RANK", "LOCALID", "PROCID", "NODEID", "NODENAME", "HOST", "LOCAL_SIZE", "LOCAL_WORLD_SIZE",
                           "VISIBLE_DEVICES", "DEVICE_ORDINAL", "GPUS", "PID", "GTIDS", "CPU_BIND", "LISTEN_FD"})
    if (upper.find(part) != std::string::npos) return true;
  return false;
}

}  // namespace accmigrate

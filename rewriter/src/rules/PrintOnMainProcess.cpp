// Printing from a training program: on N processes every line comes out N times, and each process
// prints its own share of what the line reports (its half of the batch's loss). Two rules:
// - print-on-main-process (default): in functions that use the accelerator (the fact
//   accelerator-users), `std::cout << a << b << std::endl;` becomes `accelerator.print(a, b);`
//   (printed by the local main process, with std::cout's formatting), printf/puts get
//   `if (accelerator.is_local_main_process())`. A printed number or tensor that differs between
//   processes and is a mean or a sum over the process's samples (MetricShare.h: a loss, a count) is
//   printed reduced over processes, `accelerator.reduce(loss.item<float>(), "mean")`, so that the
//   line shows what one process printed over the whole data; for printf the reduced value is
//   computed by every process in a line before the guarded call (a collective must be reached by
//   all). Values that reduce-metrics already reduced (the fact reduced-values) print as they are.
//   A printed value that differs between processes with no known reduction, or a print that only
//   some processes reach (RankDependence.h), is printed from the main process and reported.
// - print-on-every-process (default, report): what print-on-main-process did not rewrite (not
//   selected, no final newline for accelerator.print to add, inside a lambda), with the line to use.
// print-on-main-process produces rewritten-prints, which print-on-every-process consumes.
#include "analysis/Analysis.h"
#include "analysis/Matchers.h"
#include "analysis/MetricShare.h"
#include "analysis/RankDependence.h"
#include "engine/EditText.h"
#include "engine/Migration.h"

#include <clang/AST/ExprCXX.h>
#include <clang/AST/ParentMapContext.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <vector>

using namespace clang;
using namespace clang::ast_matchers;
using namespace accmigrate::matchers;

namespace accmigrate {
namespace {

bool isNewline(const Expr *e) {
  e = e->IgnoreParenImpCasts();
  if (const auto *ref = dyn_cast<DeclRefExpr>(e)) return ref->getDecl()->getQualifiedNameAsString() == "std::endl";
  if (const auto *str = dyn_cast<StringLiteral>(e)) return str->getBytes() == "\n";
  if (const auto *ch = dyn_cast<CharacterLiteral>(e)) return ch->getValue() == '\n';
  return false;
}

// A string literal that ends the line (`" done\n"`): accelerator.print adds the newline itself.
const StringLiteral *endsLine(const Expr *e) {
  const auto *str = dyn_cast<StringLiteral>(e->IgnoreParenImpCasts());
  if (!str || !str->isOrdinary() || str->getBytes().size() < 2) return nullptr;
  StringRef bytes = str->getBytes();
  return bytes.endswith("\n") && bytes.drop_back().find('\n') == StringRef::npos ? str : nullptr;
}

// `std::cout << a << b << std::endl` as its operands {a, b}; false when it cannot become
// accelerator.print (no final newline, which print adds; std::endl or flush in the middle).
// `lastLiteral` gets a final `"...\n"` literal whose newline print adds.
bool printOperands(const CXXOperatorCallExpr *chain, std::vector<const Expr *> &operands,
                   const StringLiteral *&lastLiteral) {
  const Expr *e = chain;
  while (const auto *op = dyn_cast<CXXOperatorCallExpr>(e->IgnoreParenImpCasts())) {
    if (op->getOperator() != OO_LessLess || op->getNumArgs() != 2) return false;
    operands.insert(operands.begin(), op->getArg(1));
    e = op->getArg(0);
  }
  lastLiteral = nullptr;
  if (operands.empty()) return false;
  if (isNewline(operands.back())) operands.pop_back();
  else if (!(lastLiteral = endsLine(operands.back()))) return false;
  for (const Expr *operand : operands)
    if (isNewline(operand)) return false;
  return true;
}

// The statement the print is, when its value is discarded: in a block, or the unbraced body of an
// if/for/while/do (`if (step % 100 == 0) std::cout << ...;`). `inBlock` says which.
bool isStatement(const Stmt &print, ASTContext &ctx, bool &inBlock) {
  const Stmt *node = &print;
  DynTypedNodeList parents = ctx.getParents(print);
  while (!parents.empty()) {
    const Stmt *p = parents[0].get<Stmt>();
    if (!p || !(isa<ExprWithCleanups>(p) || isa<ImplicitCastExpr>(p) || isa<MaterializeTemporaryExpr>(p) ||
                isa<CXXBindTemporaryExpr>(p)))
      break;
    node = p;
    parents = ctx.getParents(*p);
  }
  if (parents.empty()) return false;
  inBlock = parents[0].get<CompoundStmt>() != nullptr;
  if (inBlock) return true;
  if (const auto *s = parents[0].get<IfStmt>()) return s->getThen() == node || s->getElse() == node;
  if (const auto *s = parents[0].get<ForStmt>()) return s->getBody() == node;
  if (const auto *s = parents[0].get<CXXForRangeStmt>()) return s->getBody() == node;
  if (const auto *s = parents[0].get<WhileStmt>()) return s->getBody() == node;
  if (const auto *s = parents[0].get<DoStmt>()) return s->getBody() == node;
  return false;
}

// The statement sits in a lambda, which may not capture the accelerator.
bool inLambda(const Stmt &s, ASTContext &ctx) {
  for (DynTypedNodeList parents = ctx.getParents(s); !parents.empty(); parents = ctx.getParents(parents[0])) {
    if (parents[0].get<LambdaExpr>()) return true;
    if (const auto *fn = parents[0].get<FunctionDecl>()) {
      const auto *method = dyn_cast<CXXMethodDecl>(fn);
      return method && method->getParent()->isLambda();  // a lambda's body hangs from its call operator
    }
  }
  return false;
}

// A value worth reducing: a number (not a bool or a character) or a tensor.
bool isValue(const Expr *e) {
  QualType type = e->getType().getNonReferenceType();
  if (isTensor(type)) return true;
  type = type.getCanonicalType();
  return (type->isIntegerType() && !type->isBooleanType() && !type->isAnyCharacterType()) ||
         type->isRealFloatingType();
}

// How one printed value is written: as it is, reduced over processes, or as it is with a report.
struct Operand {
  const Expr *expr;
  std::string text;
  Share share = Share::Uniform;  // Sum/Mean: reduced; Unknown: differs, printed from the main process
};

// A print statement (one match; a template's statement comes once per instantiation too).
struct Print {
  const CallExpr *call;  // the outermost `<<` of a cout chain, or the printf/puts call
  const FunctionDecl *fn;
  bool cout;
  bool dependent;  // in a template's pattern: the instantiations know the types
};

class PrintRewriter {
 public:
  PrintRewriter(Migration &m, bool rewrite) : m_(m), rewrite_(rewrite), ranks_(m.rankDependence()), shares_(m.ctx, ranks_) {
    m.assumeUniformValues(ranks_);  // what gather-for-metrics and reduce-metrics made the same everywhere
  }

  void handle(const Print &p) {
    bool inBlock = false;
    if (!m_.usesAccelerator(p.fn) || !isStatement(*p.call, m_.ctx, inBlock)) return;
    if (!rewrite_) {
      if (!m_.isRewrittenPrint(p.call->getBeginLoc())) reportUnrewritten(p);
      return;
    }
    if (inLambda(*p.call, m_.ctx)) return;  // reported by print-on-every-process
    if (p.cout) rewriteCout(p);
    else rewritePrintf(p, inBlock);
  }

 private:
  // Each operand with its share; `reachedByAll` false leaves every value as it is (a collective
  // that only some processes reach would hang the others).
  std::vector<Operand> shareOut(const std::vector<const Expr *> &exprs, bool reachedByAll) {
    std::vector<Operand> out;
    for (const Expr *e : exprs) {
      Operand op{e, m_.text(e->getSourceRange())};
      if (isValue(e) && ranks_.isRankLocal(e)) {
        op.share = shares_.of(e);
        if (!reachedByAll && op.share != Share::Uniform) op.share = Share::Unknown;
      }
      out.push_back(op);
    }
    return out;
  }

  static std::string reduced(const Operand &op) {
    return "accelerator.reduce(" + op.text + ", \"" + reductionFor(op.share) + "\")";
  }

  void reportDiffering(const Operand &op, const Expr *rankLocalCondition) {
    if (rankLocalCondition) {
      m_.report(op.expr->getBeginLoc(),
                "`" + op.text + "` differs between processes and only the main process prints it, but the print is "
                    "under `" + m_.text(rankLocalCondition->getSourceRange()) +
                    "`, which may differ between processes too: no reduction inserted (it would wait for processes "
                    "that do not get there)",
                "make the condition the same on every process, then print `accelerator.reduce(" + op.text +
                    ", \"mean\")` (a mean over the samples) or `\"sum\"` (a count)");
      return;
    }
    m_.report(op.expr->getBeginLoc(),
              "`" + op.text + "` differs between processes and is printed by the main process only, as its own value",
              "print the value over all processes: `accelerator.reduce(" + op.text +
                  ", \"mean\")` for a mean over the samples, `\"sum\"` for a count, or "
                  "`accelerator.gather_for_metrics(...)` of the values it is computed from");
  }

  void rewriteCout(const Print &p) {
    const auto *chain = cast<CXXOperatorCallExpr>(p.call);
    std::vector<const Expr *> exprs;
    const StringLiteral *lastLiteral = nullptr;
    if (!leftmostIsCout(chain) || !printOperands(chain, exprs, lastLiteral)) return;
    const Expr *condition = ranks_.rankLocalCondition(*p.call);
    std::vector<Operand> operands = shareOut(exprs, condition == nullptr);
    // Only the `std::cout <<`, the `<<` between operands and the final `<< std::endl` change (and a
    // reduction around an operand): other rules' edits inside an operand (an argument create-accelerator
    // adds to a call) still apply.
    for (const Operand &op : operands)
      if (op.expr->getBeginLoc().isMacroID() || op.expr->getEndLoc().isMacroID() || op.text.empty()) return;
    if (p.call->getBeginLoc().isMacroID() || p.call->getEndLoc().isMacroID()) return;
    auto endOf = [&](const Expr *e) { return afterToken(e->getEndLoc(), m_.sm, m_.lang); };
    std::vector<std::pair<CharSourceRange, std::string>> edits;
    SourceLocation chainEnd = endOf(p.call);
    if (operands.empty()) {
      edits.push_back({CharSourceRange::getCharRange(p.call->getBeginLoc(), chainEnd), "accelerator.print()"});
    } else {
      edits.push_back({CharSourceRange::getCharRange(p.call->getBeginLoc(), operands.front().expr->getBeginLoc()),
                       "accelerator.print("});
      for (size_t i = 0; i + 1 < operands.size(); ++i)
        edits.push_back({CharSourceRange::getCharRange(endOf(operands[i].expr), operands[i + 1].expr->getBeginLoc()),
                         ", "});
      edits.push_back({CharSourceRange::getCharRange(endOf(operands.back().expr), chainEnd), ")"});
    }
    for (const Operand &op : operands) {
      if (op.expr->IgnoreParenImpCasts() == lastLiteral) {
        if (withoutNewline(op.text).empty()) return;
        SourceLocation end = endOf(op.expr);  // after the closing quote: `\n"` ends the literal
        edits.push_back({CharSourceRange::getCharRange(end.getLocWithOffset(-3), end.getLocWithOffset(-1)), ""});
      }
      if (op.share == Share::Sum || op.share == Share::Mean) {
        edits.push_back({CharSourceRange::getCharRange(op.expr->getBeginLoc(), op.expr->getBeginLoc()),
                         "accelerator.reduce("});
        edits.push_back({CharSourceRange::getCharRange(endOf(op.expr), endOf(op.expr)),
                         std::string(", \"") + reductionFor(op.share) + "\")"});
      }
    }
    for (auto &[range, text] : edits)
      if (!m_.replace(range, text)) return;
    m_.noteRewrittenPrint(p.call->getBeginLoc());
    for (const Operand &op : operands)
      if (op.share == Share::Unknown) reportDiffering(op, condition);
  }

  void rewritePrintf(const Print &p, bool inBlock) {
    const Expr *condition = ranks_.rankLocalCondition(*p.call);
    std::vector<const Expr *> exprs;
    for (unsigned i = 1; i < p.call->getNumArgs(); ++i) exprs.push_back(p.call->getArg(i));
    std::vector<Operand> operands = shareOut(exprs, condition == nullptr);
    // An argument that changes the program (`++step`) would run on the main process only once guarded.
    for (const Operand &op : operands)
      if (op.expr->HasSideEffects(m_.ctx) && op.share != Share::Sum && op.share != Share::Mean) {
        m_.report(op.expr->getBeginLoc(),
                  "printf prints on every process, and its argument `" + op.text +
                      "` changes the program: under `if (accelerator.is_local_main_process())` it would run on the "
                      "main process only",
                  "compute it before the print on every process (`const auto value = " + op.text +
                      ";`), then print `value` under `if (accelerator.is_local_main_process())`");
        m_.noteRewrittenPrint(p.call->getBeginLoc());  // reported here: nothing left for print-on-every-process
        return;
      }
    // Every process computes a reduced value before the guard: a collective inside it would leave the
    // main process waiting for the others. The unbraced body of an if or a loop gets braces (a guard
    // `if` there would take an `else` that follows).
    std::string before = inBlock ? "" : "{ ", indent = inBlock ? lineIndent(p.call->getBeginLoc(), m_.sm) : "";
    const char *separator = inBlock ? "\n" : " ";
    std::vector<std::pair<const Operand *, std::string>> names;
    for (const Operand &op : operands) {
      if (op.share != Share::Sum && op.share != Share::Mean) continue;
      std::string name = freshName(p, op);
      before += "const auto " + name + " = " + reduced(op) + ";" + separator + indent;
      names.emplace_back(&op, name);
    }
    for (auto &[op, name] : names)
      if (!m_.replace(op->expr->getSourceRange(), name)) return;
    if (!m_.insert(p.call->getBeginLoc(), before + "if (accelerator.is_local_main_process()) ")) return;
    if (!inBlock && !m_.insert(statementRange(p.call, m_.sm, m_.lang).getEnd(), " }")) return;
    m_.noteRewrittenPrint(p.call->getBeginLoc());
    for (const Operand &op : operands)
      if (op.share == Share::Unknown) reportDiffering(op, condition);
  }

  // `loss_mean` for `loss.item<float>()` reduced with "mean", unless the function already declares or
  // uses the name (a new local would clash with it or hide it).
  std::string freshName(const Print &p, const Operand &op) {
    const VarDecl *root = rootVariable(op.expr);
    std::string base = (root ? root->getNameAsString() : std::string("value")) + "_" + reductionFor(op.share);
    std::set<std::string> &taken = namesIn(p.fn);
    std::string name = base;
    for (int i = 2; taken.count(name); ++i) name = base + std::to_string(i);
    taken.insert(name);
    return name;
  }

  // The names a function's parameters and body declare or refer to (the function as written).
  std::set<std::string> &namesIn(const FunctionDecl *fn) {
    auto [it, added] = names_.emplace(fn, std::set<std::string>());
    if (!added) return it->second;
    for (const ParmVarDecl *parameter : fn->parameters()) it->second.insert(parameter->getNameAsString());
    std::function<void(const Stmt *)> scan = [&](const Stmt *s) {
      if (!s) return;
      if (const auto *ref = dyn_cast<DeclRefExpr>(s)) it->second.insert(ref->getNameInfo().getAsString());
      if (const auto *decls = dyn_cast<DeclStmt>(s))
        for (const Decl *d : decls->decls())
          if (const auto *named = dyn_cast<NamedDecl>(d)) it->second.insert(named->getNameAsString());
      for (const Stmt *child : s->children()) scan(child);
    };
    scan(fn->getBody());
    return it->second;
  }

  // `" done\n"` as written, without its `\n` (print adds the newline); "" when it is spelled otherwise.
  static std::string withoutNewline(const std::string &literal) {
    if (literal.size() < 4 || literal.compare(literal.size() - 3, 3, "\\n\"") != 0) return "";
    return literal.substr(0, literal.size() - 3) + "\"";
  }

  static bool leftmostIsCout(const CXXOperatorCallExpr *chain) {
    const Expr *leftmost = chain;
    while (const auto *op = dyn_cast<CXXOperatorCallExpr>(leftmost->IgnoreParenImpCasts())) leftmost = op->getArg(0);
    const auto *stream = dyn_cast<DeclRefExpr>(leftmost->IgnoreParenImpCasts());
    return stream && stream->getDecl()->getQualifiedNameAsString() == "std::cout";
  }

  void reportUnrewritten(const Print &p) {
    if (!p.cout) {
      m_.report(p.call->getBeginLoc(), "printf prints on every process",
                "print on the main process only: `if (accelerator.is_local_main_process()) " +
                    m_.text(p.call->getSourceRange()) + ";`");
      return;
    }
    const auto *chain = cast<CXXOperatorCallExpr>(p.call);
    if (!leftmostIsCout(chain)) return;
    std::vector<const Expr *> exprs;
    const StringLiteral *lastLiteral = nullptr;
    if (!printOperands(chain, exprs, lastLiteral) || inLambda(*p.call, m_.ctx)) {
      m_.report(p.call->getBeginLoc(), "std::cout prints on every process",
                "guard it: `if (accelerator.is_local_main_process()) " + m_.text(p.call->getSourceRange()) + ";`");
      return;
    }
    std::string line = "accelerator.print(";
    for (size_t i = 0; i < exprs.size(); ++i) {
      std::string text = m_.text(exprs[i]->getSourceRange());
      if (exprs[i]->IgnoreParenImpCasts() == lastLiteral) text = withoutNewline(text);
      line += (i ? ", " : "") + text;
    }
    m_.report(p.call->getBeginLoc(), "std::cout prints on every process",
              "print once, on the main process: `" + line + ");`");
  }

  Migration &m_;
  bool rewrite_;
  RankDependence ranks_;
  MetricShares shares_;
  std::map<const FunctionDecl *, std::set<std::string>> names_;
};

void registerPrint(Migration &m, bool rewrite) {
  // What is printed, in the order found; which prints are in functions that use the accelerator (the
  // fact accelerator-users) is known after the traversal.
  auto prints = std::make_shared<std::vector<Print>>();
  auto inFn = inFunction(functionDecl().bind("fn"));
  auto cout = declRefExpr(to(varDecl(hasName("::std::cout"))));
  auto chain = cxxOperatorCallExpr(hasOverloadedOperatorName("<<"), hasArgument(0, ignoringImplicit(cout)));
  // The whole statement: the outermost `<<` of a chain that starts at std::cout.
  m.onMatch(cxxOperatorCallExpr(hasOverloadedOperatorName("<<"), anyOf(chain, hasDescendant(chain)), inFn).bind("print"),
            [prints](const BoundNodes &nodes) {
    const auto *call = nodes.getNodeAs<CallExpr>("print");
    prints->push_back({call, nodes.getNodeAs<FunctionDecl>("fn"), true, call->isInstantiationDependent()});
  });
  m.onMatch(
      callExpr(callee(functionDecl(hasAnyName("::printf", "::std::printf", "::puts", "::std::puts"))), inFn).bind("printf"),
      [prints](const BoundNodes &nodes) {
        const auto *call = nodes.getNodeAs<CallExpr>("printf");
        prints->push_back({call, nodes.getNodeAs<FunctionDecl>("fn"), false, call->isInstantiationDependent()});
      });

  m.atEnd([&m, prints, rewrite] {
    // A statement once, as an instantiation sees it when there is one (its types are concrete).
    std::map<SourceLocation, const Print *> chosen;
    std::vector<SourceLocation> order;
    for (const Print &p : *prints) {
      auto [it, added] = chosen.emplace(p.call->getBeginLoc(), &p);
      if (added) order.push_back(p.call->getBeginLoc());
      else if (it->second->dependent && !p.dependent) it->second = &p;
    }
    PrintRewriter printer(m, rewrite);
    for (SourceLocation at : order) printer.handle(*chosen[at]);
  });
}

}  // namespace

void registerPrintOnMainProcess(Migration &m) { registerPrint(m, /*rewrite=*/true); }
void registerPrintOnEveryProcess(Migration &m) { registerPrint(m, /*rewrite=*/false); }

}  // namespace accmigrate

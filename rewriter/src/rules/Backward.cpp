// backward: `loss.backward(args...)` on a tensor becomes `accelerator.backward(loss, args...)`, which
// scales the loss for mixed precision and gradient accumulation and lets DDP overlap its all-reduce.
#include "analysis/Matchers.h"
#include "engine/Migration.h"

#include <clang/AST/ExprCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <clang/Lex/Lexer.h>

using namespace clang;
using namespace clang::ast_matchers;
using namespace accmigrate::matchers;

namespace accmigrate {

void registerBackward(Migration &m) {
  auto tensorBackward = cxxMemberCallExpr(callee(cxxMethodDecl(hasName("backward"), ofClass(derivesFromClass("at::TensorBase")))));
  m.onMatch(tensorBackward.bind("call"), [&m](const BoundNodes &nodes) {
    const auto *call = nodes.getNodeAs<CXXMemberCallExpr>("call");
    const auto *member = dyn_cast<MemberExpr>(call->getCallee()->IgnoreParens());
    const Expr *object = call->getImplicitObjectArgument()->IgnoreImpCasts();
    std::string loss = m.text(object->getSourceRange());
    if (!member || loss.empty()) {
      m.report(call->getBeginLoc(), "inside a macro expansion, which acc-migrate never edits",
               "change it by hand to `accelerator.backward(" + m.text(SourceRange(m.sm.getSpellingLoc(object->getBeginLoc()), m.sm.getSpellingLoc(object->getEndLoc()))) + ")`");
      return;
    }
    if (member->isArrow()) loss = "*" + loss;
    // libtorch's backward(gradient, retain_graph, create_graph, inputs) (TensorBody.h): acc's has no
    // `inputs` (gradients of some leaves only, which DDP's hooks do not follow).
    if (call->getNumArgs() >= 4 && !isa<CXXDefaultArgExpr>(call->getArg(3))) {
      std::string kept;
      for (unsigned i = 0; i < 3; ++i) kept += ", " + m.text(call->getArg(i)->getSourceRange());
      m.report(call->getBeginLoc(), "`backward` with `inputs`: accelerator.backward has no such argument",
               "write `accelerator.backward(" + loss + kept +
                   ");`: every parameter gets its gradient, as DDP's synchronisation needs");
      return;
    }
    // The arguments as written, comments included; defaulted ones stay defaulted.
    std::optional<Token> lparen = Lexer::findNextToken(member->getMemberLoc(), m.sm, m.lang);
    std::string args;
    if (lparen && lparen->is(tok::l_paren))
      args = StringRef(Lexer::getSourceText(CharSourceRange::getCharRange(lparen->getEndLoc(), call->getRParenLoc()),
                                            m.sm, m.lang)).trim().str();
    std::string text = "accelerator.backward(" + loss;
    if (!args.empty()) text += ", " + args;
    text += ")";
    if (m.replace(call->getSourceRange(), text)) m.useAccelerator(m.enclosingFunction(*call));
  });
}

}  // namespace accmigrate

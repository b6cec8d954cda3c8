// The calls in the unit (whose callers a function has, whether its address is taken), the
// project's functions, and what counts as a training step or a file write ("before training").
#include "analysis/RankDependenceImpl.h"
#include "analysis/TorchTypes.h"

#include <clang/AST/ParentMapContext.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/AST/StmtCXX.h>
#include <llvm/ADT/StringSet.h>
#include <functional>

namespace accmigrate {

using namespace rankdep;

// The definition of `fn` when it is the project's own (its body in this unit, outside system headers
// and the libraries'), else null.
const FunctionDecl *RankDependence::Impl::projectDefinition(const FunctionDecl *fn) const {
  const FunctionDecl *def = nullptr;
  if (!fn || !fn->hasBody(def) || !def) return nullptr;
  if (sm_.isInSystemHeader(def->getLocation()) || isStandardLibrary(def) || isTorchOrAcc(def)) return nullptr;
  return def;
}

namespace {
class CallIndex : public RecursiveASTVisitor<CallIndex> {
 public:
  CallIndex(std::map<const FunctionDecl *, std::vector<const Expr *>> &calls,
            std::set<const FunctionDecl *> &addressTaken)
      : calls_(calls), addressTaken_(addressTaken) {}
  bool shouldVisitTemplateInstantiations() const { return true; }
  bool shouldVisitImplicitCode() const { return true; }
  bool VisitCallExpr(CallExpr *call) {
    if (const FunctionDecl *callee = call->getDirectCallee()) {
      calls_[functionKey(callee)].push_back(call);
      callees_.insert(call->getCallee()->IgnoreParenImpCasts());
    }
    return true;
  }
  bool VisitCXXConstructExpr(CXXConstructExpr *construction) {
    calls_[functionKey(construction->getConstructor())].push_back(construction);
    return true;
  }
  bool VisitDeclRefExpr(DeclRefExpr *ref) {
    if (const auto *fn = dyn_cast<FunctionDecl>(ref->getDecl()); fn && !callees_.count(ref))
      addressTaken_.insert(functionKey(fn));
    return true;
  }

 private:
  std::map<const FunctionDecl *, std::vector<const Expr *>> &calls_;
  std::set<const FunctionDecl *> &addressTaken_;
  std::set<const Expr *> callees_;
};
}  // namespace

// The calls in the project's code (the declarations this file parsed outside system headers, as
// Migration's traversal scope: torch's, from a PCH or not, are left out) and their instantiations.
void RankDependence::Impl::indexCalls() {
  if (indexed_) return;
  indexed_ = true;
  CallIndex index(calls_, addressTaken_);
  for (Decl *d : ctx_.getTranslationUnitDecl()->noload_decls())
    if (!sm_.isInSystemHeader(d->getLocation())) index.TraverseDecl(d);
}

const std::vector<const Expr *> &RankDependence::Impl::callSites(const FunctionDecl *fn) {
  indexCalls();
  return calls_[functionKey(fn)];
}

// Calls of `fn` may exist that the unit does not show: none shown (other files call it), its
// address taken, or a virtual method (called through a base).
bool RankDependence::Impl::callersUnknown(const FunctionDecl *fn) {
  const auto *method = dyn_cast<CXXMethodDecl>(fn);
  return callSites(fn).empty() || addressTaken_.count(functionKey(fn)) || (method && method->isVirtual());
}

// Training and files: "before training".
//
// A file a process reads is the same for every process as long as no process may have written it
// yet. So a read counts as before training when nothing that trains or writes a file comes before
// it: no event (below) before it in its function's source, none inside a loop around it, and,
// unless the function is the one being followed from a call (then that call is checked the same
// way), none before or around any call of its function in the unit, up to functions without callers
// in the unit (main, entry points). Events: `backward()`, an optimizer's or scheduler's `step()`, a
// range-for over a DataLoader, torch::save, an accelerator's save_* and wait_for_everyone, the
// construction or open() of an std::ofstream/std::fstream, fopen/open/creat/mkdir/remove/rename/
// unlink, std::filesystem's writers (create_directories, remove, rename, copy...), and a call of
// a project function that has one (transitively) or whose body is not in the unit.

bool RankDependence::Impl::isEvent(const Stmt *s) {
  if (const auto *loop = dyn_cast<CXXForRangeStmt>(s))
    return loop->getRangeInit() && isDataLoader(loop->getRangeInit()->getType());
  if (const auto *construction = dyn_cast<CXXConstructExpr>(s)) {
    if (isFileOutput(construction->getType())) return true;
    const FunctionDecl *def = projectDefinition(construction->getConstructor());
    return def && !events(def).empty();
  }
  const auto *call = dyn_cast<CallExpr>(s);
  const FunctionDecl *callee = call ? call->getDirectCallee() : nullptr;
  if (!callee) return false;
  std::string name = nameOf(callee);
  const Expr *object = nullptr;
  if (const auto *mc = dyn_cast<CXXMemberCallExpr>(call)) object = mc->getImplicitObjectArgument();
  if (name == "backward" || isFunctionNamed(callee, "torch::save")) return true;
  if (object && name == "step" && !isStandardLibrary(callee)) return true;
  if (isAcceleratorObject(object)) return llvm::StringRef(name).startswith("save") || name == "wait_for_everyone";
  if (object && name == "open" && isFileOutput(object->getType())) return true;
  if (isCFunction(callee, sm_))
    return name == "fopen" || name == "freopen" || name == "open" || name == "creat" || name == "mkdir" ||
           name == "rmdir" || name == "remove" || name == "rename" || name == "unlink";
  if (isStandardLibrary(callee)) {
    static const llvm::StringSet<> kWriters = {"create_directory", "create_directories",
                                               "remove",           "remove_all",
                                               "rename",           "copy",
                                               "copy_file",        "resize_file",
                                               "create_symlink",   "create_directory_symlink",
                                               "create_hard_link", "permissions"};
    return inNamespaceNamed(callee, "filesystem") && kWriters.count(name);
  }
  if (isTorchOrAcc(callee) || sm_.isInSystemHeader(callee->getLocation())) return false;
  const FunctionDecl *def = projectDefinition(callee);
  if (!def) return true;  // the project's, defined elsewhere: in doubt
  if (const auto *method = dyn_cast<CXXMethodDecl>(def); method && method->isVirtual()) return true;
  return !events(def).empty();
}

namespace {
class EventCollector : public RecursiveASTVisitor<EventCollector> {
 public:
  explicit EventCollector(std::function<bool(const Stmt *)> isEvent) : isEvent_(std::move(isEvent)) {}
  bool shouldVisitTemplateInstantiations() const { return true; }
  bool VisitStmt(Stmt *s) {
    if (isEvent_(s)) events.push_back(s);
    return true;
  }
  std::vector<const Stmt *> events;

 private:
  std::function<bool(const Stmt *)> isEvent_;
};
}  // namespace

const std::vector<const Stmt *> &RankDependence::Impl::events(const FunctionDecl *fn) {
  static const std::vector<const Stmt *> kNone;
  auto found = events_.find(fn);
  if (found != events_.end()) return found->second;
  if (!eventsInProgress_.insert(fn).second) return kNone;  // recursion adds no event
  EventCollector collector([this](const Stmt *s) { return isEvent(s); });
  if (fn->getBody()) collector.TraverseStmt(const_cast<Stmt *>(fn->getBody()));
  eventsInProgress_.erase(fn);
  return events_[fn] = std::move(collector.events);
}

// `fn` reads a file (a stream that is not a string's), itself or through a project function.
bool RankDependence::Impl::readsFiles(const FunctionDecl *fn) {
  auto found = readsFiles_.find(fn);
  if (found != readsFiles_.end()) return found->second == 1;
  readsFiles_[fn] = 0;
  struct Reads : RecursiveASTVisitor<Reads> {
    Impl &impl;
    bool found = false;
    explicit Reads(Impl &i) : impl(i) {}
    bool shouldVisitTemplateInstantiations() const { return true; }
    bool VisitCallExpr(CallExpr *call) {
      const Expr *stream = nullptr;
      if (const auto *mc = dyn_cast<CXXMemberCallExpr>(call))
        stream = mc->getImplicitObjectArgument();
      else if (call->getNumArgs() > 0)
        stream = call->getArg(0);
      if (stream && isInputStream(stream->getType()) && !isStringStream(stream->getType())) found = true;
      if (const FunctionDecl *def = impl.projectDefinition(call->getDirectCallee()); def && impl.readsFiles(def))
        found = true;
      return !found;
    }
  } reads(*this);
  if (fn->getBody()) reads.TraverseStmt(const_cast<Stmt *>(fn->getBody()));
  readsFiles_[fn] = reads.found ? 1 : 2;
  return reads.found;
}

bool RankDependence::Impl::beforeTraining(const Stmt &s, const Mode &m, std::string *event,
                                          std::set<const FunctionDecl *> &seen) {
  const FunctionDecl *around = functionAround(s);
  if (!around) return true;
  const FunctionDecl *fn = outerOf(around);
  std::vector<const Stmt *> loops;
  for (DynTypedNodeList parents = ctx_.getParents(s); !parents.empty(); parents = ctx_.getParents(parents[0])) {
    if (parents[0].get<FunctionDecl>()) break;
    if (const auto *loop = parents[0].get<Stmt>(); loop && isa<ForStmt, WhileStmt, DoStmt, CXXForRangeStmt>(loop))
      loops.push_back(loop);
  }
  for (const Stmt *e : events(fn)) {
    bool inLoop = false;
    for (const Stmt *loop : loops) inLoop |= encloses(*loop, *e);
    if (inLoop || isBefore(sm_, e->getBeginLoc(), s.getBeginLoc())) {
      *event = "`" + text(e) + "` (line " + std::to_string(line(e->getBeginLoc())) + ")";
      return false;
    }
  }
  if (m.fn == fn) return true;  // the call being followed is checked by its caller
  if (!seen.insert(fn).second) return true;
  for (const Expr *site : callSites(fn))
    if (!beforeTraining(*site, Mode{}, event, seen)) return false;
  return true;
}

}  // namespace accmigrate

#include "Rule.h"

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>
#include <algorithm>

namespace accmigrate {

void registerDataLoader(Migration &);
void registerBackward(Migration &);
void registerClipGrad(Migration &);
void registerDeviceDeclaration(Migration &);
void registerPrepare(Migration &);
void registerDeviceMove(Migration &);
void registerOptimizerDeclaration(Migration &);
void registerSchedulerDeclaration(Migration &);
void registerGradientAccumulation(Migration &);
void registerSaveOnMainProcess(Migration &);
void registerWriteOnMainProcess(Migration &);
void registerGatherForMetrics(Migration &);
void registerReduceMetrics(Migration &);
void registerFsdpUnits(Migration &);
void registerPrintOnMainProcess(Migration &);
void registerPrintOnEveryProcess(Migration &);
void registerEveryRankSideEffect(Migration &);
void registerNoDataLoader(Migration &);
void registerDatasetSizeDivision(Migration &);
void registerViewBatchSize(Migration &);
void registerStaticCuda(Migration &);
void registerCudaInFactory(Migration &);
void registerOutOfScope(Migration &);
void registerCreateAccelerator(Migration &);
void registerIncludeAcc(Migration &);
void registerCmakeLink(Migration &);

const char *factName(Fact fact) {
  switch (fact) {
    case AcceleratorUsers: return "accelerator-users";
    case AcceleratorOptions: return "accelerator-options";
    case PreparedModels: return "prepared-models";
    case FilesUsingAcc: return "files-using-acc";
    case RewrittenPrints: return "rewritten-prints";
    case GatheredCounts: return "gathered-counts";
    case ReducedValues: return "reduced-values";
    case HandledWrites: return "handled-writes";
  }
  return "?";
}

// Facts, shortened for the table below.
constexpr FactSet kUsers = AcceleratorUsers, kOptions = AcceleratorOptions, kPrepared = PreparedModels,
                  kAcc = FilesUsingAcc, kPrints = RewrittenPrints, kGathered = GatheredCounts,
                  kReduced = ReducedValues, kWrites = HandledWrites, kNone = 0;

const std::vector<Rule> &allRules() {
  // name, summary, on by default, produces, consumes, registerMatchers
  static const std::vector<Rule> rules = {
      {"data-loader", "torch::data::make_data_loader(...) becomes accelerator.prepare_data_loader(...)", true,
       kUsers | kAcc, kNone, registerDataLoader},
      {"backward", "loss.backward(...) becomes accelerator.backward(loss, ...)", true, kUsers | kAcc, kNone,
       registerBackward},
      {"clip-grad", "torch::nn::utils::clip_grad_norm_/clip_grad_value_ become the accelerator's", true,
       kUsers | kAcc, kNone, registerClipGrad},
      {"device-declaration", "the training device becomes accelerator.device()", true, kUsers | kAcc, kNone,
       registerDeviceDeclaration},
      {"prepare", "accelerator.prepare(models..., optimizers..., schedulers...) before the training loop", true,
       kUsers | kPrepared | kAcc, kNone, registerPrepare},
      {"device-move", "removes .to(device)/.cuda() of prepared models and loader batches; keeps dtype and CPU moves",
       true, kUsers | kAcc, kPrepared, registerDeviceMove},
      {"optimizer-declaration", "optimizers are created as acc::Optimizer<T>", true, kAcc, kNone,
       registerOptimizerDeclaration},
      {"scheduler-declaration", "LR schedulers are created as acc::Scheduler<T>", true, kOptions | kAcc, kNone,
       registerSchedulerDeclaration},
      {"gradient-accumulation",
       "a manual accumulation loop (loss / k, step every k-th batch) becomes accelerator.accumulate", true,
       kUsers | kOptions | kAcc, kNone, registerGradientAccumulation},
      {"gather-for-metrics",
       "counts over a loader divided by the dataset's size count gathered predictions (gather_for_metrics)", true,
       kGathered | kUsers | kAcc, kNone, registerGatherForMetrics},
      {"reduce-metrics", "numbers accumulated over a loader's batches are reduced over processes after the loop",
       true, kReduced | kUsers | kAcc, kGathered, registerReduceMetrics},
      {"save-on-main-process",
       "torch::save(...) runs on the main process only (barriers where every process gets to); a prepared model's "
       "becomes accelerator.save_model",
       true, kUsers | kAcc, kPrepared | kGathered | kReduced, registerSaveOnMainProcess},
      {"write-on-main-process",
       "std::ofstream files are opened, and create_directories runs, on the main process only (a barrier after it)",
       true, kWrites | kUsers | kAcc, kGathered | kReduced, registerWriteOnMainProcess},
      {"fsdp-units", "the forward of each --fsdp-units module type starts with acc::ForwardHooksGuard (FSDP units)",
       false, kAcc, kNone, registerFsdpUnits},
      {"print-on-main-process",
       "std::cout/printf print once, on the main process, values reduced over processes where they differ", true,
       kPrints | kAcc, kUsers | kGathered | kReduced, registerPrintOnMainProcess},
      {"print-on-every-process", "reports prints left printing on every process (what print-on-main-process cannot "
       "rewrite)", true, kNone, kUsers | kPrints, registerPrintOnEveryProcess},
      {"every-rank-side-effect", "reports file writes and whole-dataset progress counts that every process does",
       true, kNone, kUsers | kWrites, registerEveryRankSideEffect},
      {"no-data-loader", "reports training loops that batch without a DataLoader (every process gets all data)", true,
       kNone, kNone, registerNoDataLoader},
      {"out-of-scope", "reports training code out of reach: project headers outside the scope, backward not migrated",
       true, kNone, kUsers, registerOutOfScope},
      {"dataset-size-division", "reports counts divided by the whole dataset's size (each process sees a shard)",
       true, kNone, kGathered | kReduced, registerDatasetSizeDivision},
      {"view-batch-size", "reports view/reshape({batch_size, ...}) on loader batches (batches can be short)", true,
       kNone, kNone, registerViewBatchSize},
      {"static-cuda", "reports static variables created on CUDA (before main and the accelerator)", true, kNone,
       kNone, registerStaticCuda},
      {"cuda-in-factory", "reports torch::kCUDA passed to factories and loaders (every process on cuda:0)", true,
       kNone, kNone, registerCudaInFactory},
  };
  return rules;
}

const std::vector<Rule> &allFinalizers() {
  static const std::vector<Rule> finalizers = {
      {"create-accelerator", "declares acc::Accelerator accelerator; where it is used, or passes it in", true, kAcc,
       kUsers | kOptions, registerCreateAccelerator},
      {"include-acc", "#include <acc/acc.h> once in each file that uses acc", true, kNone, kAcc, registerIncludeAcc},
      {"cmake-link", "links the CMake targets that build migrated files to acc (find_package(acc), acc::acc)", true,
       kNone, kAcc, registerCmakeLink},
  };
  return finalizers;
}

bool isFinalizer(const Rule &rule) {
  const std::vector<Rule> &finalizers = allFinalizers();
  return &rule >= finalizers.data() && &rule < finalizers.data() + finalizers.size();
}

const Rule *findRule(llvm::StringRef name) {
  for (const std::vector<Rule> *list : {&allRules(), &allFinalizers()})
    for (const Rule &rule : *list)
      if (name == rule.name) return &rule;
  return nullptr;
}

// "data-loader, backward, ..., cuda-in-factory (and the sets `default`, `all`)"
static std::string ruleNames() {
  std::string names;
  for (const Rule &rule : allRules()) names += (names.empty() ? "" : ", ") + std::string(rule.name);
  return names + " (and the sets `default`, `all`)";
}

bool selectRules(const std::string &spec, std::vector<const Rule *> &selected, std::string &error) {
  const std::vector<Rule> &rules = allRules();
  std::vector<bool> on(rules.size(), false);
  auto setDefault = [&] {
    for (size_t i = 0; i < on.size(); ++i) on[i] = rules[i].enabledByDefault;
  };
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(spec).split(parts, ',', -1, /*KeepEmpty=*/false);
  // A list that starts by adding or removing rules (`+name`, `-name`) changes the default set; one
  // that starts with a name selects exactly the names given.
  if (parts.empty() || parts.front().trim().startswith("-") || parts.front().trim().startswith("+")) setDefault();
  for (llvm::StringRef part : parts) {
    part = part.trim();
    bool enable = !part.consume_front("-");
    part.consume_front("+");
    if (part == "default") { setDefault(); continue; }
    bool found = false;
    for (size_t i = 0; i < on.size(); ++i)
      if (part == "all" || part == rules[i].name) {
        on[i] = enable;
        found = true;
      }
    if (found) continue;
    const Rule *finalizer = findRule(part);
    if (finalizer && isFinalizer(*finalizer)) {
      error = "'" + part.str() + "' is a finalizer: it always runs, after the rules, and cannot be selected or "
              "turned off; the rules are: " + ruleNames();
      return false;
    }
    error = "unknown rule '" + part.str() + "'; `acc-migrate --list-rules` shows the rules: " + ruleNames();
    return false;
  }
  selected.clear();
  for (size_t i = 0; i < on.size(); ++i)
    if (on[i]) selected.push_back(&rules[i]);
  return true;
}

std::vector<std::string> selectionWarnings(const std::vector<const Rule *> &selected) {
  auto isSelected = [&](const Rule &rule) {
    return std::find(selected.begin(), selected.end(), &rule) != selected.end();
  };
  std::vector<std::string> warnings;
  for (const Rule *rule : selected)
    for (Fact fact : kAllFacts) {
      // Only the fact without which a rule has nothing to act on: it works in the functions that use
      // the accelerator. Other facts it consumes only refine what it does.
      if (!(rule->consumes & fact) || fact != AcceleratorUsers) continue;
      std::string producers;
      bool produced = false;
      for (const Rule &other : allRules()) {
        if (!(other.produces & fact)) continue;
        produced = produced || isSelected(other);
        producers += (producers.empty() ? "" : ", ") + std::string(other.name);
      }
      if (produced) continue;
      warnings.push_back(std::string(rule->name) + " acts only in functions that use the accelerator (the fact " +
                         factName(fact) + "), which no selected rule produces, so it will change nothing; select it "
                         "with a rule that produces it (" + producers + "), or add it to the default rules with "
                         "--rules=+" + rule->name);
      break;  // one message per rule
    }
  return warnings;
}

bool leavesOutDefaults(const std::vector<const Rule *> &selected) {
  for (const Rule &rule : allRules())
    if (rule.enabledByDefault && std::find(selected.begin(), selected.end(), &rule) == selected.end()) return true;
  return false;
}

// How `spec` names `rule` itself (not through `all`/`default`): +1 to add it (`name`, `+name`), -1 to
// drop it (`-name`), 0 not at all; the last mention wins.
static int namesRule(const std::string &spec, llvm::StringRef rule) {
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(spec).split(parts, ',', -1, /*KeepEmpty=*/false);
  int named = 0;
  for (llvm::StringRef part : parts) {
    part = part.trim();
    bool enable = !part.consume_front("-");
    part.consume_front("+");
    if (part == rule) named = enable ? 1 : -1;
  }
  return named;
}

bool applySettings(const std::string &spec, const RuleSettings &settings, std::vector<const Rule *> &selected,
                   std::string &error) {
  const Rule *units = findRule("fsdp-units");
  int named = namesRule(spec, units->name);
  if (settings.fsdpUnits.empty()) {
    if (named > 0) {
      error =
          "the rule fsdp-units needs the module types whose forward FSDP gathers around: name them with "
          "--fsdp-units=TypeA,TypeB (which also enables the rule)";
      return false;
    }
    return true;
  }
  if (named < 0) {
    error = "--fsdp-units enables the rule fsdp-units, which --rules drops (-fsdp-units); give one or the other";
    return false;
  }
  if (std::find(selected.begin(), selected.end(), units) != selected.end()) return true;
  // In the registry's order, like every selection (pointers into allRules(): their order is its order).
  selected.push_back(units);
  std::stable_sort(selected.begin(), selected.end(), [](const Rule *a, const Rule *b) { return a < b; });
  return true;
}

}  // namespace accmigrate

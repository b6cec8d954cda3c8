#include "Rule.h"

#include <llvm/ADT/StringRef.h>
#include <llvm/ADT/SmallVector.h>

namespace accmigrate {

void applyDataLoader(Migration &);
void applyBackward(Migration &);
void applyClipGrad(Migration &);
void applyDeviceDeclaration(Migration &);
void applyPrepare(Migration &);
void applyDeviceMove(Migration &);
void applyOptimizerDeclaration(Migration &);
void applySchedulerDeclaration(Migration &);
void applySaveOnMainProcess(Migration &);
void applyPrintOnMainProcess(Migration &);
void applyPrintInLoop(Migration &);
void applyNoDataLoader(Migration &);
void applyDatasetSizeDivision(Migration &);
void applyViewBatchSize(Migration &);
void applyStaticCuda(Migration &);
void applyCudaInFactory(Migration &);
void applyCreateAccelerator(Migration &);
void applyIncludeAcc(Migration &);
void applyCmakeLink(Migration &);

const std::vector<Rule> &allRules() {
  static const std::vector<Rule> rules = {
      {"data-loader", "torch::data::make_data_loader(...) becomes accelerator.prepare_data_loader(...)", true,
       applyDataLoader},
      {"backward", "loss.backward(...) becomes accelerator.backward(loss, ...)", true, applyBackward},
      {"clip-grad", "torch::nn::utils::clip_grad_norm_/clip_grad_value_ become the accelerator's", true,
       applyClipGrad},
      {"device-declaration", "the training device becomes accelerator.device()", true, applyDeviceDeclaration},
      {"prepare", "accelerator.prepare(models..., optimizers..., schedulers...) before the training loop", true,
       applyPrepare},
      {"device-move", "removes .to(device)/.cuda() of prepared models and loader batches; keeps dtype and CPU moves",
       true, applyDeviceMove},
      {"optimizer-declaration", "optimizers are created as acc::Optimizer<T>", true, applyOptimizerDeclaration},
      {"scheduler-declaration", "LR schedulers are created as acc::Scheduler<T>", true, applySchedulerDeclaration},
      {"save-on-main-process", "torch::save(...) runs after wait_for_everyone() on the main process only", true,
       applySaveOnMainProcess},
      {"print-on-main-process", "std::cout << ... << std::endl in training loops becomes accelerator.print(...)", false,
       applyPrintOnMainProcess},
      {"print-in-loop", "reports std::cout/printf in training loops (they print once per process)", true,
       applyPrintInLoop},
      {"no-data-loader", "reports training loops that batch without a DataLoader (every process gets all data)", true,
       applyNoDataLoader},
      {"dataset-size-division", "reports counts divided by the whole dataset's size (each process sees a shard)",
       true, applyDatasetSizeDivision},
      {"view-batch-size", "reports view/reshape({batch_size, ...}) on loader batches (batches can be short)", true,
       applyViewBatchSize},
      {"static-cuda", "reports static variables created on CUDA (before main and the accelerator)", true,
       applyStaticCuda},
      {"cuda-in-factory", "reports torch::kCUDA passed to factories and loaders (every process on cuda:0)", true,
       applyCudaInFactory},
      {"create-accelerator", "declares acc::Accelerator accelerator; where it is used, or passes it in", true,
       applyCreateAccelerator},
      {"include-acc", "#include <acc/acc.h> once in each file that uses acc", true, applyIncludeAcc},
      {"cmake-link", "reports the CMake targets that build migrated files (find_package(acc), link acc::acc)", true,
       applyCmakeLink},
  };
  return rules;
}

bool selectRules(const std::string &spec, std::vector<const Rule *> &selected, std::string &error) {
  std::vector<bool> on(allRules().size(), false);
  auto setDefault = [&] {
    for (size_t i = 0; i < on.size(); ++i) on[i] = allRules()[i].enabledByDefault;
  };
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(spec).split(parts, ',', -1, /*KeepEmpty=*/false);
  // A list that starts by removing rules removes them from the default set.
  if (parts.empty() || parts.front().startswith("-")) setDefault();
  for (llvm::StringRef part : parts) {
    part = part.trim();
    bool enable = !part.consume_front("-");
    part.consume_front("+");
    if (part == "default") { setDefault(); continue; }
    bool found = false;
    for (size_t i = 0; i < on.size(); ++i)
      if (part == "all" || part == allRules()[i].name) {
        on[i] = enable;
        found = true;
      }
    if (!found) {
      error = "unknown rule '" + part.str() + "'; `acc-migrate --list-rules` shows the rules";
      return false;
    }
  }
  selected.clear();
  for (size_t i = 0; i < on.size(); ++i)
    if (on[i]) selected.push_back(&allRules()[i]);
  return true;
}

}  // namespace accmigrate

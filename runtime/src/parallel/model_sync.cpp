#include "parallel/model_sync.h"

#include <ATen/ops/cat.h>
#include <c10/core/GradMode.h>

#include <map>
#include <sstream>

#include <acc/errors.h>

#include "comm/process_group.h"

namespace acc::detail {

namespace {
std::vector<std::string> describe(const torch::nn::Module& model) {
  std::vector<std::string> lines;
  auto add = [&](const char* kind, const std::string& name, const at::Tensor& t) {
    std::ostringstream line;
    line << kind << " '" << name << "' " << t.sizes() << " " << t.scalar_type();
    lines.push_back(line.str());
  };
  for (const auto& item : model.named_parameters()) add("parameter", item.key(), item.value());
  for (const auto& item : model.named_buffers()) add("buffer", item.key(), item.value());
  return lines;
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) out += line + "\n";
  return out;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}
}  // namespace

void check_models_agree(ProcessGroup& group, const torch::nn::Module& model) {
  auto all = group.all_gather_strings(join(describe(model)), "prepare (model check)");
  auto reference = split(all[0]);
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    auto other = split(all[r]);
    size_t i = 0;
    while (i < reference.size() && i < other.size() && reference[i] == other[i]) ++i;
    auto at = [](const std::vector<std::string>& lines, size_t k) {
      return k < lines.size() ? lines[k] : std::string("nothing (the model ends)");
    };
    throw DistributedError("acc: prepare(model): the model differs between ranks: entry " +
                           std::to_string(i + 1) + " is " + at(reference, i) + " on rank 0 but " +
                           at(other, i) + " on rank " + std::to_string(r) +
                           ". Every rank must construct the same model before prepare().");
  }
}

bool check_empty_weights(ProcessGroup* group, const std::string& first_meta, bool from_rank0) {
  const std::string how = "(a meta tensor: the model was built under acc::init_empty_weights)";
  if (group == nullptr) {
    if (first_meta.empty()) return false;
    throw ConfigError("acc: prepare(model): '" + first_meta + "' has no values " + how +
                      " and no other process gives it any; load the weights before prepare() "
                      "(acc::load_checkpoint_in_model), or build the model without init_empty_weights");
  }
  const auto all = group->all_gather_strings(first_meta, "prepare (model check: weights built empty)");
  if (!all[0].empty()) {
    throw ConfigError("acc: prepare(model): '" + all[0] + "' has no values on rank 0 " + how +
                      "; rank 0 gives every process its weights, so build the model with its weights on the "
                      "main process only: acc::init_empty_weights empty(accelerator.cpu_ram_efficient_loading() "
                      "&& !accelerator.is_main_process());");
  }
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r].empty() || from_rank0) continue;
    throw ConfigError("acc: prepare(model): '" + all[r] + "' has no values on rank " + std::to_string(r) + " " +
                      how + ", and FSDP sync_module_states is off, so nothing gives it rank 0's; set "
                      "FSDP_SYNC_MODULE_STATES=true (FullyShardedDataParallelPlugin().sync_module_states(true)), "
                      "or build the model with its weights on every rank");
  }
  for (const auto& name : all) {
    if (!name.empty()) return true;
  }
  return false;
}

void broadcast_model_state(ProcessGroup& group, torch::nn::Module& model, bool trainable) {
  std::vector<at::Tensor> tensors;
  for (auto& p : model.parameters()) {
    if (trainable || !p.requires_grad()) tensors.push_back(p);
  }
  for (auto& b : model.buffers()) tensors.push_back(b);
  broadcast_coalesced(group, tensors, 0, "prepare (broadcast of rank 0's weights)");
}

void broadcast_coalesced(ProcessGroup& group, const std::vector<at::Tensor>& tensors, int root,
                         const std::string& what) {
  c10::NoGradGuard no_grad;
  std::map<std::pair<int, std::string>, std::vector<at::Tensor>> by_kind;
  for (const auto& t : tensors) {
    by_kind[{static_cast<int>(t.scalar_type()), t.device().str()}].push_back(t);
  }
  for (auto& [kind, group_tensors] : by_kind) {
    std::vector<at::Tensor> flat_parts;
    for (const auto& t : group_tensors) flat_parts.push_back(t.reshape({-1}));
    auto flat = at::cat(flat_parts);
    group.broadcast_(flat, root, what);
    int64_t offset = 0;
    for (auto& t : group_tensors) {
      t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
}

}  // namespace acc::detail

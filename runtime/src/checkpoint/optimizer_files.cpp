// Why not Optimizer::save alone: libtorch's archive copies every tensor through a zip reader and
// back, which held load_state to about 0.4 of the disk's read speed. The state tensors, nearly
// all of the bytes, go to safetensors instead (mapped, one copy onto the device); libtorch still
// writes the small rest, so every optimizer's options and counters round-trip as libtorch
// defines them.
#include "checkpoint/optimizer_files.h"

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <deque>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include <acc/checkpoint_model.h>
#include <acc/safetensors.h>

#include "checkpoint/archive_file.h"
#include "checkpoint/tensor_copy.h"
#include "optim/optimizer_state_fields.h"

namespace acc::detail {
namespace {

// Every parameter with state, numbered across the param groups in order (the numbering that
// survives into a new process, unlike libtorch's TensorImpl addresses).
template <typename F>
void for_each_state(torch::optim::Optimizer& optimizer, F&& visit) {
  size_t index = 0;
  for (auto& group : optimizer.param_groups()) {
    for (auto& parameter : group.params()) {
      auto found = optimizer.state().find(parameter.unsafeGetTensorImpl());
      if (found != optimizer.state().end()) visit(index, parameter, *found->second);
      ++index;
    }
  }
}

std::string field_name(size_t index, const char* field) { return "state." + std::to_string(index) + "." + field; }
std::string element_name(size_t index, const char* field, size_t k) {
  return field_name(index, field) + "." + std::to_string(k);
}

}  // namespace

void save_optimizer_state(torch::optim::Optimizer& optimizer, const std::string& tensors_path,
                          const std::string& archive_path) {
  safetensors::NamedTensors tensors;
  // The tensors are lent out of the optimizer while libtorch writes the rest (it skips undefined
  // tensors) and put back even when writing fails.
  std::vector<std::pair<at::Tensor*, at::Tensor>> lent;
  std::vector<std::pair<std::deque<at::Tensor>*, std::deque<at::Tensor>>> lent_deques;
  struct GiveBack {
    decltype(lent)& tensors;
    decltype(lent_deques)& deques;
    ~GiveBack() {
      for (auto& [slot, tensor] : tensors) *slot = std::move(tensor);
      for (auto& [slot, deque] : deques) *slot = std::move(deque);
    }
  } give_back{lent, lent_deques};
  for_each_state(optimizer, [&](size_t index, const at::Tensor&, torch::optim::OptimizerParamState& state) {
    auto fields = fields_of(state);
    for (auto& [field, slot] : fields.tensors) {
      if (!slot->defined()) continue;
      tensors.emplace_back(field_name(index, field), *slot);
      lent.emplace_back(slot, std::exchange(*slot, at::Tensor()));
    }
    for (auto& [field, slot] : fields.deques) {
      for (size_t k = 0; k < slot->size(); ++k) tensors.emplace_back(element_name(index, field, k), (*slot)[k]);
      lent_deques.emplace_back(slot, std::exchange(*slot, std::deque<at::Tensor>()));
    }
  });
  torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  archive.save_to(archive_path);
  safetensors::save_file(tensors, tensors_path,
                         {{"format", "pt"}, {"acc", "optimizer state: state.{parameter}.{field}[.{k}]"}});
}

void load_optimizer_archive(torch::optim::Optimizer& optimizer, const std::string& archive_path, c10::Device device) {
  auto archive = read_archive(archive_path, device);
  try {
    optimizer.load(archive);
  } catch (const c10::Error& error) {
    throw CheckpointError("acc: cannot load '" + archive_path + "' into this optimizer (" + error.what_without_backtrace() +
                          "): it was saved from another optimizer type or other parameters; resume with the "
                          "optimizer and model that saved it");
  }
}

void load_optimizer_state(torch::optim::Optimizer& optimizer, const std::string& tensors_path,
                          const std::string& archive_path, c10::Device device) {
  safetensors::MappedFile file(tensors_path);
  // The state tensors the optimizer has now are the destinations where they fit (loading into a
  // running optimizer, e.g. going back to a checkpoint): fresh memory costs a page fault per 4 KiB.
  std::map<std::string, at::Tensor> reusable;
  for_each_state(optimizer, [&](size_t index, const at::Tensor&, torch::optim::OptimizerParamState& state) {
    auto fields = fields_of(state);
    for (auto& [field, slot] : fields.tensors) {
      if (slot->defined()) reusable.emplace(field_name(index, field), *slot);
    }
  });
  load_optimizer_archive(optimizer, archive_path, device);
  std::set<std::string> unused;
  for (const auto& name : file.names()) unused.insert(name);
  auto take = [&](const std::string& name, const at::Tensor& parameter) {
    unused.erase(name);
    const auto mapped = file.tensor(name);
    // A copy: the optimizer updates its state in place, and the mapping is copy-on-write.
    const auto options = mapped.options().device(parameter.device());
    auto found = reusable.find(name);
    at::Tensor destination;
    if (found != reusable.end() && found->second.sizes() == mapped.sizes() && found->second.is_contiguous() &&
        found->second.options().type_equal(options) && found->second.device() == options.device()) {
      destination = found->second;
    } else {
      destination = at::empty(mapped.sizes(), options);
    }
    copy_into(destination, mapped);
    return destination;
  };
  for_each_state(optimizer, [&](size_t index, const at::Tensor& parameter, torch::optim::OptimizerParamState& state) {
    auto fields = fields_of(state);
    for (auto& [field, slot] : fields.tensors) {
      const auto name = field_name(index, field);
      if (file.contains(name)) *slot = take(name, parameter);
    }
    for (auto& [field, slot] : fields.deques) {
      for (size_t k = 0; file.contains(element_name(index, field, k)); ++k) {
        slot->push_back(take(element_name(index, field, k), parameter));
      }
    }
  });
  if (!unused.empty()) {
    throw CheckpointError("acc: '" + tensors_path + "' holds optimizer state that this optimizer has no place for (" +
                          *unused.begin() + ", " + std::to_string(unused.size()) +
                          " in all): it was saved from another optimizer type or other parameters; resume with "
                          "the optimizer and model that saved it");
  }
}

}  // namespace acc::detail

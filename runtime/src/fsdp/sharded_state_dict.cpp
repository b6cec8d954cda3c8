#include "fsdp/sharded_state_dict.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>
#include <torch/serialize/output-archive.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <typeinfo>

#include <acc/checkpoint_model.h>
#include <acc/errors.h>

#include "checkpoint/optimizer_files.h"
#include "checkpoint/shard_files.h"
#include "comm/process_group.h"
#include "fsdp/sharded_engine.h"
#include "fsdp/sharded_optimizer.h"
#include "fsdp/sharded_reducer.h"
#include "optim/optimizer_state_fields.h"

namespace fs = std::filesystem;

namespace acc::detail {
namespace {

using StateMap = std::remove_reference_t<decltype(std::declval<torch::optim::Optimizer&>().state())>;

std::string state_name(size_t index, const std::string& field) {
  return "state." + std::to_string(index) + "." + field;
}

// The optimizer seen as the user built it: whole parameters in its groups and `states` keyed by
// them, for as long as this lives. libtorch's archive then reads and writes what it would for an
// unsharded optimizer; the pieces and their state come back at destruction.
class WholeParameterView {
 public:
  WholeParameterView(torch::optim::Optimizer& optimizer, const OptimizerLayout& layout, StateMap states)
      : optimizer_(optimizer) {
    auto& groups = optimizer.param_groups();
    if (groups.size() != layout.size()) {
      throw CheckpointError("acc: the optimizer has " + std::to_string(groups.size()) +
                            " parameter groups but had " + std::to_string(layout.size()) +
                            " when it was prepared; under FSDP add every parameter group before "
                            "accelerator.prepare");
    }
    for (size_t g = 0; g < groups.size(); ++g) {
      std::vector<at::Tensor> whole;
      for (const auto& slot : layout[g]) whole.push_back(slot.full);
      saved_params_.push_back(std::exchange(groups[g].params(), std::move(whole)));
    }
    saved_state_ = std::exchange(optimizer.state(), std::move(states));
  }
  ~WholeParameterView() {
    auto& groups = optimizer_.param_groups();
    for (size_t g = 0; g < saved_params_.size(); ++g) groups[g].params() = std::move(saved_params_[g]);
    optimizer_.state() = std::move(saved_state_);
  }
  WholeParameterView(const WholeParameterView&) = delete;
  WholeParameterView& operator=(const WholeParameterView&) = delete;
  /// The state keyed by whole parameters (what libtorch loaded).
  StateMap take_state() { return std::exchange(optimizer_.state(), StateMap()); }

 private:
  torch::optim::Optimizer& optimizer_;
  std::vector<std::vector<at::Tensor>> saved_params_;
  StateMap saved_state_;
};

std::vector<const OptimizerSlot*> slots_of(const OptimizerLayout& layout) {
  std::vector<const OptimizerSlot*> out;
  for (const auto& group : layout) {
    for (const auto& slot : group) out.push_back(&slot);
  }
  return out;
}

std::unique_ptr<torch::optim::OptimizerParamState> require_known_state(const torch::optim::Optimizer& optimizer) {
  auto state = new_param_state(optimizer);
  if (!state) {
    throw CheckpointError(std::string("acc: FSDP state dicts slice and gather optimizer state field by field, which "
                                      "acc knows for SGD, Adam, AdamW, Adagrad and RMSprop, not for ") +
                          typeid(optimizer).name() +
                          "; use one of those, or FSDP_SHARDING_STRATEGY=NO_SHARD with FULL_STATE_DICT");
  }
  return state;
}

std::vector<std::string> tensor_field_names(const torch::optim::Optimizer& optimizer) {
  auto state = require_known_state(optimizer);
  std::vector<std::string> out;
  for (const auto& [field, slot] : fields_of(*state).tensors) out.emplace_back(field);
  return out;
}

// What every rank agrees on before any tensor moves: per slot, whether it has state and its step
// count (column 0: step + 1, or 0 for no state) and which tensor fields are defined (one column
// each). Each rank knows this only for its pieces; the maximum over the shard group is the whole.
at::Tensor state_summary(torch::optim::Optimizer& optimizer, const std::vector<const OptimizerSlot*>& slots,
                         const std::vector<std::string>& fields, ProcessGroup* group) {
  auto summary = at::zeros({static_cast<int64_t>(slots.size()), static_cast<int64_t>(1 + fields.size())}, at::kLong);
  auto cells = summary.accessor<int64_t, 2>();
  for (size_t p = 0; p < slots.size(); ++p) {
    if (!slots[p]->local.defined()) continue;
    auto found = optimizer.state().find(slots[p]->local.unsafeGetTensorImpl());
    if (found == optimizer.state().end()) continue;
    auto state_fields = fields_of(*found->second);
    cells[p][0] = state_fields.step ? *state_fields.step + 1 : 1;
    for (size_t f = 0; f < fields.size(); ++f) {
      for (const auto& [name, tensor] : state_fields.tensors) {
        if (name == fields[f] && tensor->defined()) cells[p][1 + f] = 1;
      }
    }
  }
  if (group != nullptr && summary.numel() > 0) {
    group->all_reduce_(summary, c10d::ReduceOp::MAX, "FSDP optimizer state summary");
  }
  return summary;
}

// Fresh states holding only what the summary says (step counts), keyed by whole parameters.
StateMap scalar_states(const torch::optim::Optimizer& optimizer, const std::vector<const OptimizerSlot*>& slots,
                       const at::Tensor& summary) {
  StateMap states;
  auto cells = summary.accessor<int64_t, 2>();
  for (size_t p = 0; p < slots.size(); ++p) {
    if (cells[p][0] == 0) continue;
    auto state = new_param_state(optimizer);
    if (auto* step = fields_of(*state).step) *step = cells[p][0] - 1;
    states[slots[p]->full.unsafeGetTensorImpl()] = std::move(state);
  }
  return states;
}

at::Tensor* field_slot(torch::optim::OptimizerParamState& state, const std::string& field) {
  for (auto& [name, slot] : fields_of(state).tensors) {
    if (name == field) return slot;
  }
  return nullptr;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << c10::IntArrayRef(shape);
  return out.str();
}

bool has_shards(const std::string& directory, const std::string& stem) {
  if (!fs::is_directory(directory)) return false;
  const auto prefix = stem + ".shard-0-of-";
  for (const auto& entry : fs::directory_iterator(directory)) {
    if (entry.path().filename().string().rfind(prefix, 0) == 0) return true;
  }
  return false;
}


// An optimizer's state as the shard group sees it while it is saved or loaded: its slots (one per
// parameter, numbered across groups), the tensor fields its type keeps, and (when saving) the
// summary all ranks agreed on.
struct OptimizerStateView {
  OptimizerStateView(torch::optim::Optimizer& optimizer, const OptimizerLayout* sharded)
      : optimizer(optimizer),
        layout(sharded ? *sharded : unsharded_layout(optimizer)),
        slots(slots_of(layout)),
        fields(tensor_field_names(optimizer)) {}

  /// This rank's tensor of `field` for `slot`; undefined where it holds none.
  at::Tensor local_field(const OptimizerSlot& slot, const std::string& field) const {
    if (!slot.local.defined()) return {};
    auto found = optimizer.state().find(slot.local.unsafeGetTensorImpl());
    if (found == optimizer.state().end()) return {};
    auto* tensor = field_slot(*found->second, field);
    return tensor ? *tensor : at::Tensor();
  }

  torch::optim::Optimizer& optimizer;
  const OptimizerLayout layout;
  const std::vector<const OptimizerSlot*> slots;
  const std::vector<std::string> fields;
};

// Every tensor of the checkpoint must have a place, whichever rank fills it.
void check_state_names(const OptimizerStateView& view, const ShardedTensors& source) {
  for (const auto& name : source.names()) {
    bool known = false;
    for (size_t p = 0; p < view.slots.size() && !known; ++p) {
      for (const auto& field : view.fields) {
        if (name != state_name(p, field)) continue;
        known = true;
        if (source.shape(name) != view.slots[p]->full.sizes().vec()) {
          throw CheckpointError("acc: " + source.description() + ": '" + name + "' has shape " +
                                shape_text(source.shape(name)) + " but parameter " + std::to_string(p) + " has " +
                                shape_text(view.slots[p]->full.sizes().vec()) +
                                "; resume with the model and optimizer that saved it");
        }
      }
    }
    if (!known) {
      throw CheckpointError("acc: " + source.description() + " holds optimizer state '" + name +
                            "' that this optimizer has no place for: it was saved from another optimizer type "
                            "or other parameters; resume with the optimizer and model that saved it");
    }
  }
}

// libtorch's archive of the rest (step counts, options) read as the unsharded optimizer would:
// states keyed by whole parameters.
StateMap load_whole_states(const OptimizerStateView& view, const std::string& archive_path, c10::Device device) {
  WholeParameterView whole(view.optimizer, view.layout, StateMap());
  load_optimizer_archive(view.optimizer, archive_path, device);
  return whole.take_state();
}

// This rank's states: each whole state cloned onto its local piece, with the piece's element
// range of every tensor field read from the checkpoint.
StateMap local_states(const OptimizerStateView& view, const ShardedTensors& source, const StateMap& whole_states) {
  StateMap states;
  for (size_t p = 0; p < view.slots.size(); ++p) {
    const auto& slot = *view.slots[p];
    if (!slot.local.defined()) continue;
    auto found = whole_states.find(slot.full.unsafeGetTensorImpl());
    if (found == whole_states.end()) continue;
    auto state = found->second->clone();
    for (const auto& field : view.fields) {
      auto* tensor = field_slot(*state, field);
      const auto name = state_name(p, field);
      if (!source.contains(name)) continue;
      auto destination = at::empty(slot.local.sizes(), slot.local.options().dtype(source.dtype(name)));
      source.read(name, slot.begin, slot.end, destination.view({-1}));
      *tensor = std::move(destination);
    }
    states[slot.local.unsafeGetTensorImpl()] = std::move(state);
  }
  return states;
}

class ShardedStateDictLayout : public StateDictLayout {
 public:
  ShardedStateDictLayout(StateDictType type, ShardedEngine* engine) : type_(type), engine_(engine) {
    if (type == StateDictType::LOCAL_STATE_DICT) {
      throw ConfigError("acc: FSDP LOCAL_STATE_DICT is not supported (torch deprecates it); set "
                        "FSDP_STATE_DICT_TYPE to FULL_STATE_DICT or SHARDED_STATE_DICT");
    }
    if (engine != nullptr) {
      shard_ = engine->shard_group().rank();
      shards_ = engine->shard_group().size();
      writes_shards_ = engine->replica_group() == nullptr || engine->replica_group()->rank() == 0;
    }
  }

  void save_model(torch::nn::Module& model, const std::string& stem, bool writer, const FileFor& file) override;
  void save_optimizer(torch::optim::Optimizer& optimizer, const std::string& stem, bool writer,
                      const FileFor& file) override;
  void load_model(torch::nn::Module& model, const std::string& directory, const std::string& stem) override;
  void load_optimizer(torch::optim::Optimizer& optimizer, const std::string& directory, const std::string& stem,
                      c10::Device device) override;

  void save_weights(const torch::nn::Module& model, const std::string& directory, const std::string& max_shard_size,
                    bool safe_serialization, bool writer) override {
    auto whole = full_parameters(model, /*writeback=*/false);
    whole_->save_weights(model, directory, max_shard_size, safe_serialization, writer);
  }

 private:
  bool sharded_files() const { return type_ == StateDictType::SHARDED_STATE_DICT; }
  /// FULL_SHARD releases units between steps; what reads or writes parameters gathers them first
  /// (on every rank: it is a collective).
  FullParametersGuard full_parameters(const torch::nn::Module& model, bool writeback) {
    return engine_ ? engine_->full_parameters(model, writeback) : FullParametersGuard();
  }
  /// Whether this rank writes its shard files (SHARDED_STATE_DICT).
  bool writes_shards(bool writer) const { return engine_ ? writes_shards_ : writer; }
  ProcessGroup* shard_group() const { return engine_ ? &engine_->shard_group() : nullptr; }
  void load_sharded_model(torch::nn::Module& model, const std::string& directory, const std::string& stem);
  void save_optimizer_shards(const OptimizerStateView& view, const at::Tensor& summary, const std::string& stem,
                             bool writer, const FileFor& file);
  void save_full_optimizer(const OptimizerStateView& view, const at::Tensor& summary, const std::string& stem,
                           bool writer, const FileFor& file);
  void gather_unit_fields(const OptimizerStateView& view, const at::Tensor& summary, ShardedReducer& reducer,
                          const std::map<std::pair<const ShardedReducer*, size_t>, size_t>& slot_of, bool writer,
                          StateMap& states);

  StateDictType type_;
  ShardedEngine* engine_;
  /// What is written as DDP writes it (whole tensors on every rank) goes through the plain layout:
  /// the parameters between steps (SHARD_GRAD_OP), and under FULL_STATE_DICT an optimizer that
  /// nothing sharded.
  std::unique_ptr<StateDictLayout> whole_ = make_plain_state_dict_layout();
  int shard_ = 0;
  int shards_ = 1;
  bool writes_shards_ = true;  // false on the other machines' replicas (HYBRID_SHARD_ZERO2)
};

void ShardedStateDictLayout::save_model(torch::nn::Module& model, const std::string& stem, bool writer,
                                        const FileFor& file) {
  auto whole = full_parameters(model, /*writeback=*/false);
  if (!sharded_files()) return whole_->save_model(model, stem, writer, file);
  if (!writes_shards(writer)) return;
  ShardedReducer* reducer = engine_ ? engine_->reducer_of(model) : nullptr;
  std::vector<TensorSlice> slices;
  auto add = [&](const std::string& name, const at::Tensor& tensor) {
    const auto whole = tensor.detach();
    std::optional<size_t> index = reducer ? reducer->index_of(tensor) : std::nullopt;
    if (!index) {
      if (shard_ == 0) slices.push_back({name, whole, 0, whole.numel(), whole.sizes().vec()});
      return;
    }
    const auto [begin, end] = reducer->piece_range(*index);
    if (begin < end) {
      slices.push_back({name, whole.reshape({-1}).narrow(0, begin, end - begin), begin, end, whole.sizes().vec()});
    }
  };
  for (const auto& item : model.named_parameters()) add(item.key(), item.value());
  for (const auto& item : model.named_buffers()) add(item.key(), item.value());
  save_shard(slices, shard_, shards_, file(shard_file_name(stem, shard_, shards_)));
}

void ShardedStateDictLayout::load_model(torch::nn::Module& model, const std::string& directory,
                                        const std::string& stem) {
  auto whole = full_parameters(model, /*writeback=*/true);
  if (sharded_files()) {
    load_sharded_model(model, directory, stem);
  } else {
    const auto path = (fs::path(directory) / (stem + ".safetensors")).string();
    if (!fs::exists(path)) {
      throw CheckpointError("acc: the checkpoint has no '" + path + "'" +
                            (has_shards(directory, stem)
                                 ? ": it was saved with FSDP SHARDED_STATE_DICT; load it with "
                                   "FSDP_STATE_DICT_TYPE=SHARDED_STATE_DICT (or merge its weights with acc-merge-weights)"
                                 : ": it was saved with other prepared objects than this program has"));
    }
    load_checkpoint_in_model(model, path, /*strict=*/true);
  }
  if (auto* reducer = engine_ ? engine_->reducer_of(model) : nullptr) reducer->parameters_changed();
}

void ShardedStateDictLayout::load_sharded_model(torch::nn::Module& model, const std::string& directory,
                                                const std::string& stem) {
  const auto shards = ShardedTensors::open_shards(directory, stem);
  std::vector<std::pair<std::string, at::Tensor>> targets;
  for (const auto& item : model.named_parameters()) targets.emplace_back(item.key(), item.value());
  for (const auto& item : model.named_buffers()) targets.emplace_back(item.key(), item.value());
  std::set<std::string> unexpected;
  for (const auto& name : shards.names()) unexpected.insert(name);
  std::vector<std::string> problems;
  c10::NoGradGuard no_grad;
  for (auto& [name, tensor] : targets) {
    unexpected.erase(name);
    if (!shards.contains(name)) {
      problems.push_back("missing: " + name);
      continue;
    }
    if (shards.shape(name) != tensor.sizes().vec()) {
      problems.push_back("shape of " + name + ": model " + shape_text(tensor.sizes().vec()) + ", checkpoint " +
                         shape_text(shards.shape(name)));
      continue;
    }
    // In place: FSDP's parameters are views of their unit's flat buffer.
    auto destination = tensor.is_contiguous() ? tensor : at::empty(tensor.sizes(), tensor.options());
    shards.read(name, 0, tensor.numel(), destination.view({-1}));
    if (!destination.is_same(tensor)) tensor.copy_(destination);
  }
  for (const auto& name : unexpected) problems.push_back("unexpected: " + name);
  if (!problems.empty()) {
    std::string text;
    for (const auto& problem : problems) text += "\n  " + problem;
    throw CheckpointError("acc: " + shards.description() + " does not match the model:" + text +
                          "\nload it into the model that saved it");
  }
}

void ShardedStateDictLayout::save_optimizer(torch::optim::Optimizer& optimizer, const std::string& stem,
                                            bool writer, const FileFor& file) {
  const OptimizerLayout* sharded = engine_ ? engine_->layout_of(optimizer) : nullptr;
  // Nothing to gather: DDP's files, for any optimizer.
  if (!sharded && !sharded_files()) return whole_->save_optimizer(optimizer, stem, writer, file);
  const OptimizerStateView view(optimizer, sharded);
  const auto summary = state_summary(optimizer, view.slots, view.fields, shard_group());
  if (sharded_files()) {
    save_optimizer_shards(view, summary, stem, writer, file);
  } else {
    save_full_optimizer(view, summary, stem, writer, file);
  }
}

// SHARDED_STATE_DICT: this rank's slices of every state tensor, and from the writer libtorch's
// archive of the rest (step counts, options) as the unsharded optimizer would write it.
void ShardedStateDictLayout::save_optimizer_shards(const OptimizerStateView& view, const at::Tensor& summary,
                                                   const std::string& stem, bool writer, const FileFor& file) {
  if (writes_shards(writer)) {
    std::vector<TensorSlice> slices;
    for (size_t p = 0; p < view.slots.size(); ++p) {
      const auto& slot = *view.slots[p];
      if (slot.reducer == nullptr && shard_ != 0) continue;  // whole: the first shard has it
      for (const auto& field : view.fields) {
        const auto tensor = view.local_field(slot, field);
        if (tensor.defined() && slot.begin < slot.end) {
          slices.push_back({state_name(p, field), tensor, slot.begin, slot.end, slot.full.sizes().vec()});
        }
      }
    }
    save_shard(slices, shard_, shards_, file(shard_file_name(stem, shard_, shards_)));
  }
  if (writer) {
    WholeParameterView whole(view.optimizer, view.layout, scalar_states(view.optimizer, view.slots, summary));
    torch::serialize::OutputArchive archive;
    view.optimizer.save(archive);
    archive.save_to(file(stem + ".libtorch.bin"));
  }
}

// FULL_STATE_DICT: whole state tensors, each unit's gathered one field at a time, written by the
// writer in DDP's files.
void ShardedStateDictLayout::save_full_optimizer(const OptimizerStateView& view, const at::Tensor& summary,
                                                 const std::string& stem, bool writer, const FileFor& file) {
  auto states = scalar_states(view.optimizer, view.slots, summary);
  auto cells = summary.accessor<int64_t, 2>();
  std::map<std::pair<const ShardedReducer*, size_t>, size_t> slot_of;
  std::vector<ShardedReducer*> reducers;
  for (size_t p = 0; p < view.slots.size(); ++p) {
    const auto& slot = *view.slots[p];
    if (slot.reducer == nullptr) {
      for (size_t f = 0; f < view.fields.size(); ++f) {
        if (!cells[p][1 + f] || !writer) continue;
        // Not sharded (frozen): every rank holds it whole.
        *field_slot(*states.at(slot.full.unsafeGetTensorImpl()), view.fields[f]) = view.local_field(slot, view.fields[f]);
      }
      continue;
    }
    slot_of[{slot.reducer, slot.index}] = p;
    if (std::find(reducers.begin(), reducers.end(), slot.reducer) == reducers.end()) reducers.push_back(slot.reducer);
  }
  c10::NoGradGuard no_grad;
  for (auto* reducer : reducers) gather_unit_fields(view, summary, *reducer, slot_of, writer, states);
  if (!writer) return;
  WholeParameterView whole(view.optimizer, view.layout, std::move(states));
  whole_->save_optimizer(view.optimizer, stem, writer, file);  // seen whole, it is DDP's optimizer
}

// Each of the reducer's units, one field at a time: laid out as the unit's flat buffer, this rank
// fills its shard and the all-gather the rest; the writer keeps the whole tensors in `states`.
void ShardedStateDictLayout::gather_unit_fields(const OptimizerStateView& view, const at::Tensor& summary,
                                                ShardedReducer& reducer,
                                                const std::map<std::pair<const ShardedReducer*, size_t>, size_t>& slot_of,
                                                bool writer, StateMap& states) {
  auto cells = summary.accessor<int64_t, 2>();
  ProcessGroup* group = shard_group();
  const auto& units = reducer.units();
  for (size_t u = 0; u < units.size(); ++u) {
    const auto& unit = units[u];
    for (size_t f = 0; f < view.fields.size(); ++f) {
      const auto& field = view.fields[f];
      std::vector<std::pair<size_t, size_t>> members;  // (slot, member position in the unit)
      for (size_t j = 0; j < unit.members.size(); ++j) {
        auto found = slot_of.find({&reducer, unit.members[j]});
        if (found != slot_of.end() && cells[found->second][1 + f]) members.emplace_back(found->second, j);
      }
      if (members.empty()) continue;  // the same on every rank: the summary is shared
      auto flat = at::zeros({unit.flat.numel()}, unit.flat.options());
      for (const auto& [p, j] : members) {
        const auto& slot = *view.slots[p];
        const auto tensor = view.local_field(slot, field);
        if (!tensor.defined() || slot.begin == slot.end) continue;
        flat.narrow(0, unit.offsets[j] + slot.begin, slot.end - slot.begin).copy_(tensor.reshape({-1}));
      }
      group->wait(group->all_gather_flat(flat),
                  "FSDP FULL_STATE_DICT gather of optimizer state '" + field + "' (unit " + std::to_string(u + 1) + ")",
                  group->timeout_for(flat));
      if (!writer) continue;
      // Offloaded as Accelerate's FullStateDictConfig(offload_to_cpu=True, rank0_only=True).
      const auto whole = flat.to(at::kCPU);
      for (const auto& [p, j] : members) {
        const auto& full = view.slots[p]->full;
        *field_slot(*states.at(full.unsafeGetTensorImpl()), field) =
            whole.narrow(0, unit.offsets[j], full.numel()).view(full.sizes());
      }
    }
  }
}

void ShardedStateDictLayout::load_optimizer(torch::optim::Optimizer& optimizer, const std::string& directory,
                                            const std::string& stem, c10::Device device) {
  const OptimizerLayout* sharded = engine_ ? engine_->layout_of(optimizer) : nullptr;
  const auto archive_path = (fs::path(directory) / (stem + ".libtorch.bin")).string();
  const auto whole_path = (fs::path(directory) / (stem + ".safetensors")).string();
  if (!sharded_files()) {
    if (!fs::exists(whole_path)) {
      throw CheckpointError("acc: the checkpoint has no '" + whole_path + "'" +
                            (has_shards(directory, stem) ? ": it was saved with FSDP SHARDED_STATE_DICT; load it "
                                                           "with FSDP_STATE_DICT_TYPE=SHARDED_STATE_DICT"
                                                         : ": it was saved with other prepared objects than this "
                                                           "program has"));
    }
    if (!sharded) {
      if (!fs::exists(archive_path)) throw CheckpointError("acc: the checkpoint has no '" + archive_path + "'");
      load_optimizer_state(optimizer, whole_path, archive_path, device);
      return;
    }
  }
  const OptimizerStateView view(optimizer, sharded);
  const auto source = sharded_files() ? ShardedTensors::open_shards(directory, stem) : ShardedTensors::open_whole(whole_path);
  if (!fs::exists(archive_path)) {
    throw CheckpointError("acc: the checkpoint has no '" + archive_path +
                          "'; it was saved with other prepared objects than this program has");
  }
  check_state_names(view, source);
  const StateMap whole_states = load_whole_states(view, archive_path, device);
  optimizer.state() = local_states(view, source, whole_states);
}

}  // namespace

std::unique_ptr<StateDictLayout> make_sharded_state_dict_layout(StateDictType type, ShardedEngine* engine) {
  return std::make_unique<ShardedStateDictLayout>(type, engine);
}

}  // namespace acc::detail

// libtorch's optimizers <-> PyTorch's optimizer.state_dict(). The per-parameter tensors have the
// same names on both sides (optim/optimizer_state_fields.h); what differs is the step count
// (libtorch: an int64 per parameter; PyTorch: a float32 scalar tensor) and the options, which
// libtorch keeps in typed structs and PyTorch in each group's dict.
#include "checkpoint/accelerate_optimizer.h"

#include <ATen/Functions.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <set>
#include <tuple>

#include <acc/errors.h>

#include "checkpoint/python_pickle.h"
#include "checkpoint/tensor_copy.h"
#include "optim/optimizer_state_fields.h"

namespace acc::detail {
namespace {

using torch::optim::Adagrad;
using torch::optim::AdagradOptions;
using torch::optim::Adam;
using torch::optim::AdamOptions;
using torch::optim::AdamW;
using torch::optim::AdamWOptions;
using torch::optim::RMSprop;
using torch::optim::RMSpropOptions;
using torch::optim::SGD;
using torch::optim::SGDOptions;

// PyTorch's name of the optimizer type, for messages and the keys of its groups.
std::string python_type(const torch::optim::Optimizer& optimizer) {
  if (dynamic_cast<const SGD*>(&optimizer)) return "SGD";
  if (dynamic_cast<const AdamW*>(&optimizer)) return "AdamW";
  if (dynamic_cast<const Adam*>(&optimizer)) return "Adam";
  if (dynamic_cast<const Adagrad*>(&optimizer)) return "Adagrad";
  if (dynamic_cast<const RMSprop*>(&optimizer)) return "RMSprop";
  return "";
}

// The type a PyTorch param group was written by, from its keys.
std::string group_type(const c10::impl::GenericDict& group) {
  auto has = [&](const char* key) { return group.contains(c10::IValue(std::string(key))); };
  if (has("betas")) {
    if (!has("decoupled_weight_decay")) return "Adam or AdamW";
    return group.at(c10::IValue(std::string("decoupled_weight_decay"))).toBool() ? "AdamW" : "Adam";
  }
  if (has("nesterov")) return "SGD";
  if (has("lr_decay")) return "Adagrad";
  if (has("alpha") && has("centered")) return "RMSprop";
  return "an optimizer acc does not know";
}

// PyTorch's flags that only select a kernel (foreach, fused, ...) or that libtorch does not have;
// written as PyTorch's defaults.
void add_python_defaults(c10::impl::GenericDict& group, const std::string& type) {
  group.insert(std::string("maximize"), false);
  group.insert(std::string("foreach"), c10::IValue());
  group.insert(std::string("differentiable"), false);
  if (type != "RMSprop") group.insert(std::string("fused"), c10::IValue());
  if (type == "Adam" || type == "AdamW" || type == "RMSprop") group.insert(std::string("capturable"), false);
  if (type == "Adam" || type == "AdamW") group.insert(std::string("decoupled_weight_decay"), type == "AdamW");
}

c10::impl::GenericDict group_options(torch::optim::OptimizerOptions& options, const std::string& type) {
  auto group = python_dict();
  auto put = [&](const char* key, c10::IValue value) { group.insert(std::string(key), std::move(value)); };
  if (auto* o = dynamic_cast<SGDOptions*>(&options)) {
    put("lr", o->lr());
    put("momentum", o->momentum());
    put("dampening", o->dampening());
    put("weight_decay", o->weight_decay());
    put("nesterov", o->nesterov());
  } else if (auto* o = dynamic_cast<AdamOptions*>(&options)) {
    put("lr", o->lr());
    put("betas", c10::ivalue::Tuple::create({std::get<0>(o->betas()), std::get<1>(o->betas())}));
    put("eps", o->eps());
    put("weight_decay", o->weight_decay());
    put("amsgrad", o->amsgrad());
  } else if (auto* o = dynamic_cast<AdamWOptions*>(&options)) {
    put("lr", o->lr());
    put("betas", c10::ivalue::Tuple::create({std::get<0>(o->betas()), std::get<1>(o->betas())}));
    put("eps", o->eps());
    put("weight_decay", o->weight_decay());
    put("amsgrad", o->amsgrad());
  } else if (auto* o = dynamic_cast<AdagradOptions*>(&options)) {
    put("lr", o->lr());
    put("lr_decay", o->lr_decay());
    put("weight_decay", o->weight_decay());
    put("initial_accumulator_value", o->initial_accumulator_value());
    put("eps", o->eps());
  } else if (auto* o = dynamic_cast<RMSpropOptions*>(&options)) {
    put("lr", o->lr());
    put("alpha", o->alpha());
    put("eps", o->eps());
    put("weight_decay", o->weight_decay());
    put("momentum", o->momentum());
    put("centered", o->centered());
  }
  add_python_defaults(group, type);
  return group;
}

class GroupReader {
 public:
  GroupReader(const c10::impl::GenericDict& group, const std::string& path) : group_(group), path_(path) {}
  double number(const char* key) const {
    const auto value = get(key);
    if (value.isDouble()) return value.toDouble();
    if (value.isInt()) return static_cast<double>(value.toInt());
    if (value.isTensor() && value.toTensor().numel() == 1) return value.toTensor().item<double>();
    fail(key, "a number");
  }
  bool flag(const char* key) const {
    const auto value = get(key);
    if (!value.isBool()) fail(key, "a bool");
    return value.toBool();
  }
  std::tuple<double, double> pair(const char* key) const {
    const auto value = get(key);
    if (!value.isTuple() && !value.isList()) fail(key, "a pair");
    std::vector<c10::IValue> items = value.isTuple() ? value.toTupleRef().elements().vec() : value.toListRef().vec();
    if (items.size() != 2) fail(key, "a pair");
    auto num = [&](const c10::IValue& v) {
      if (v.isDouble()) return v.toDouble();
      if (v.isInt()) return static_cast<double>(v.toInt());
      if (v.isTensor() && v.toTensor().numel() == 1) return v.toTensor().item<double>();
      fail(key, "a pair of numbers");
    };
    return {num(items[0]), num(items[1])};
  }

 private:
  c10::IValue get(const char* key) const {
    const c10::IValue name{std::string(key)};
    if (!group_.contains(name)) {
      throw CheckpointError("acc: a param group in '" + path_ + "' has no '" + key +
                            "'; it was not written by this optimizer type");
    }
    return group_.at(name);
  }
  [[noreturn]] void fail(const char* key, const char* what) const {
    throw CheckpointError("acc: '" + std::string(key) + "' of a param group in '" + path_ + "' is not " + what);
  }
  const c10::impl::GenericDict& group_;
  const std::string& path_;
};

void set_group_options(torch::optim::OptimizerOptions& options, const GroupReader& g) {
  if (auto* o = dynamic_cast<SGDOptions*>(&options)) {
    o->lr(g.number("lr")).momentum(g.number("momentum")).dampening(g.number("dampening"));
    o->weight_decay(g.number("weight_decay")).nesterov(g.flag("nesterov"));
  } else if (auto* o = dynamic_cast<AdamOptions*>(&options)) {
    o->lr(g.number("lr")).betas(g.pair("betas")).eps(g.number("eps"));
    o->weight_decay(g.number("weight_decay")).amsgrad(g.flag("amsgrad"));
  } else if (auto* o = dynamic_cast<AdamWOptions*>(&options)) {
    o->lr(g.number("lr")).betas(g.pair("betas")).eps(g.number("eps"));
    o->weight_decay(g.number("weight_decay")).amsgrad(g.flag("amsgrad"));
  } else if (auto* o = dynamic_cast<AdagradOptions*>(&options)) {
    o->lr(g.number("lr")).lr_decay(g.number("lr_decay")).weight_decay(g.number("weight_decay"));
    o->initial_accumulator_value(g.number("initial_accumulator_value")).eps(g.number("eps"));
  } else if (auto* o = dynamic_cast<RMSpropOptions*>(&options)) {
    o->lr(g.number("lr")).alpha(g.number("alpha")).eps(g.number("eps")).weight_decay(g.number("weight_decay"));
    o->momentum(g.number("momentum")).centered(g.flag("centered"));
  }
}

c10::impl::GenericDict require_dict(const c10::IValue& value, const std::string& what, const std::string& path) {
  if (!value.isGenericDict()) throw CheckpointError("acc: " + what + " in '" + path + "' is not a dict");
  return value.toGenericDict();
}

}  // namespace

c10::IValue python_optimizer_state(torch::optim::Optimizer& optimizer) {
  const std::string type = python_type(optimizer);
  if (type.empty()) {
    throw CheckpointError("acc: save_state in Accelerate's format knows SGD, Adam, AdamW, Adagrad and RMSprop; "
                          "this optimizer has no PyTorch counterpart acc can write. Use the default "
                          "CheckpointFormat::Acc for it");
  }
  auto state = python_dict();
  auto groups = python_list();
  int64_t index = 0;
  for (auto& group : optimizer.param_groups()) {
    auto entry = group_options(group.options(), type);
    auto params = python_list();
    for (auto& parameter : group.params()) {
      params.push_back(index);
      auto found = optimizer.state().find(parameter.unsafeGetTensorImpl());
      if (found != optimizer.state().end()) {
        auto fields = fields_of(*found->second);
        auto per_parameter = python_dict();
        // PyTorch keeps `step` as a float32 scalar tensor on the CPU (not capturable, not fused).
        if (fields.step) per_parameter.insert(std::string("step"), at::scalar_tensor(double(*fields.step), at::kFloat));
        for (auto& [field, slot] : fields.tensors) {
          if (slot->defined()) per_parameter.insert(std::string(field), slot->detach().cpu());
        }
        state.insert(index, per_parameter);
      }
      ++index;
    }
    entry.insert(std::string("params"), params);
    groups.push_back(entry);
  }
  auto out = python_dict();
  out.insert(std::string("state"), state);
  out.insert(std::string("param_groups"), groups);
  return out;
}

void load_python_optimizer_state(torch::optim::Optimizer& optimizer, const c10::IValue& state_dict,
                                 const std::string& path) {
  const std::string type = python_type(optimizer);
  if (type.empty()) {
    throw CheckpointError("acc: cannot load '" + path + "' (a PyTorch optimizer state_dict) into this optimizer: acc "
                          "maps SGD, Adam, AdamW, Adagrad and RMSprop onto libtorch's");
  }
  const auto top = require_dict(state_dict, "the optimizer state", path);
  const c10::IValue groups_key{std::string("param_groups")}, state_key{std::string("state")};
  if (!top.contains(groups_key) || !top.contains(state_key) || !top.at(groups_key).isList()) {
    throw CheckpointError("acc: '" + path + "' is not a PyTorch optimizer state_dict (no 'state' and 'param_groups')");
  }
  const auto groups = top.at(groups_key).toListRef();
  auto& mine = optimizer.param_groups();
  if (groups.size() != mine.size()) {
    throw CheckpointError("acc: '" + path + "' holds " + std::to_string(groups.size()) +
                          " param groups but this optimizer has " + std::to_string(mine.size()) +
                          "; resume with the optimizer and model that saved it");
  }
  // Check everything before changing anything: a mismatch leaves the optimizer as it was.
  std::vector<std::vector<int64_t>> numbering;
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto group = require_dict(groups[g], "a param group", path);
    const auto written_by = group_type(group);
    const bool adam_family = written_by == "Adam or AdamW" && (type == "Adam" || type == "AdamW");
    if (written_by != type && !adam_family) {
      throw CheckpointError("acc: '" + path + "' holds the state of a PyTorch " + written_by +
                            " but this optimizer is libtorch's " + type + "; resume with the same optimizer type");
    }
    const c10::IValue maximize{std::string("maximize")};
    if (group.contains(maximize) && group.at(maximize).isBool() && group.at(maximize).toBool()) {
      throw CheckpointError("acc: '" + path + "' was saved with maximize=True, which libtorch's optimizers do not "
                            "have; continue that run in Python");
    }
    const c10::IValue params_key{std::string("params")};
    if (!group.contains(params_key) || !group.at(params_key).isList()) {
      throw CheckpointError("acc: a param group in '" + path + "' has no 'params' list");
    }
    std::vector<int64_t> indices;
    for (const auto& item : group.at(params_key).toListRef()) {
      if (!item.isInt()) throw CheckpointError("acc: 'params' of a param group in '" + path + "' is not integers");
      indices.push_back(item.toInt());
    }
    if (indices.size() != mine[g].params().size()) {
      throw CheckpointError("acc: param group " + std::to_string(g) + " in '" + path + "' has " +
                            std::to_string(indices.size()) + " parameters but this optimizer's has " +
                            std::to_string(mine[g].params().size()) + "; resume with the model that saved it");
    }
    numbering.push_back(std::move(indices));
  }
  const auto state = require_dict(top.at(state_key), "'state'", path);
  std::map<int64_t, at::Tensor> parameters;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t i = 0; i < numbering[g].size(); ++i) parameters[numbering[g][i]] = mine[g].params()[i];
  }
  for (const auto& entry : state) {
    if (!entry.key().isInt() || parameters.count(entry.key().toInt()) == 0) {
      throw CheckpointError("acc: '" + path + "' holds state for a parameter no param group lists");
    }
    const auto fields = require_dict(entry.value(), "a parameter's state", path);
    auto probe = new_param_state(optimizer);
    auto known = fields_of(*probe);
    std::set<std::string> names{"step"};
    for (const auto& [field, slot] : known.tensors) names.insert(field);
    for (const auto& field : fields) {
      if (!field.key().isString() || names.count(field.key().toStringRef()) == 0) {
        throw CheckpointError("acc: '" + path + "' holds optimizer state '" +
                              (field.key().isString() ? field.key().toStringRef() : std::string("?")) +
                              "', which libtorch's " + type + " does not keep; it was saved from another optimizer");
      }
    }
  }

  for (size_t g = 0; g < groups.size(); ++g) {
    set_group_options(mine[g].options(), GroupReader(groups[g].toGenericDict(), path));
  }
  optimizer.state().clear();
  torch::NoGradGuard no_grad;
  for (const auto& entry : state) {
    const auto& parameter = parameters.at(entry.key().toInt());
    const auto fields = entry.value().toGenericDict();
    auto param_state = new_param_state(optimizer);
    auto slots = fields_of(*param_state);
    for (const auto& field : fields) {
      const auto& name = field.key().toStringRef();
      const auto& value = field.value();
      if (name == "step") {
        if (!slots.step) continue;
        const double step = value.isTensor() ? value.toTensor().item<double>()
                            : value.isInt()  ? static_cast<double>(value.toInt())
                                             : value.toDouble();
        *slots.step = std::llround(step);
        continue;
      }
      if (value.isNone()) continue;  // SGD without momentum keeps momentum_buffer=None
      if (!value.isTensor()) throw CheckpointError("acc: optimizer state '" + name + "' in '" + path + "' is not a tensor");
      for (auto& [field_name, slot] : slots.tensors) {
        if (name != field_name) continue;
        const auto& source = value.toTensor();
        if (source.sizes() != parameter.sizes()) {
          throw CheckpointError("acc: optimizer state '" + name + "' in '" + path + "' has another shape than its "
                                "parameter; resume with the model that saved it");
        }
        // As PyTorch's load_state_dict: state tensors take their parameter's dtype and device.
        *slot = at::empty(source.sizes(), parameter.options());
        copy_into(*slot, source.to(parameter.scalar_type()).contiguous());
      }
    }
    optimizer.state()[parameter.unsafeGetTensorImpl()] = std::move(param_state);
  }
}

}  // namespace acc::detail

// The Accelerate layout of a training checkpoint. File names and contents are those of
// accelerate/checkpointing.py (save_accelerator_state / load_accelerator_state): what the two
// sides share maps one to one, the rest is listed in docs/checkpointing.md and warned about.
#include "checkpoint/accelerate_format.h"

#include <ATen/Functions.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <sstream>

#include <acc/errors.h>
#include <acc/safetensors.h>
#include <acc/state.h>
#include <acc/warnings.h>

#include "checkpoint/accelerate_optimizer.h"
#include "checkpoint/archive_file.h"
#include "checkpoint/file_names.h"
#include "checkpoint/loader_positions.h"
#include "checkpoint/model_tensors.h"
#include "checkpoint/python_pickle.h"

namespace fs = std::filesystem;

namespace acc::detail {
namespace {

std::string rng_file(int rank) { return "random_states_" + std::to_string(rank) + ".pkl"; }
// acc's loader positions and registered objects have no Python counterpart: files of their own,
// which Accelerate never opens.
std::string loader_file(size_t index) { return numbered("acc_sampler", index, ".bin"); }
std::string custom_file(size_t index) { return "custom_checkpoint_" + std::to_string(index) + ".bin"; }

// Under DDP Accelerate saves the wrapped model's state_dict (unwrap=False): every name starts with
// "module.". acc mirrors it on several processes so that the same Python program loads it.
const std::string kDdpPrefix = "module.";

// The Python `random` and NumPy generator states this process inherited from a Python checkpoint.
// C++ never draws from them, so they are written back unchanged: a run that goes Python -> C++ ->
// Python finds them where it left them. Process-wide, as the generators are in Python.
struct PythonGenerators {
  std::mutex mutex;
  std::optional<c10::IValue> random_state;
  std::optional<c10::IValue> numpy_state;
};
PythonGenerators& python_generators() {
  static PythonGenerators instance;
  return instance;
}

// MT19937 seeding, as CPython's random.seed(0) (init_by_array of [0]) and NumPy's legacy
// np.random.seed(0) (init_genrand(0)) do: the states written for a run that began in C++, which
// never had Python generators.
std::vector<uint32_t> init_genrand(uint32_t seed) {
  std::vector<uint32_t> mt(624);
  mt[0] = seed;
  for (uint32_t i = 1; i < 624; ++i) mt[i] = 1812433253u * (mt[i - 1] ^ (mt[i - 1] >> 30)) + i;
  return mt;
}
std::vector<uint32_t> init_by_array(const std::vector<uint32_t>& key) {
  auto mt = init_genrand(19650218u);
  uint32_t i = 1, j = 0;
  for (size_t k = std::max<size_t>(624, key.size()); k > 0; --k) {
    mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1664525u)) + key[j] + j;
    if (++i >= 624) { mt[0] = mt[623]; i = 1; }
    if (++j >= key.size()) j = 0;
  }
  for (size_t k = 623; k > 0; --k) {
    mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1566083941u)) - i;
    if (++i >= 624) { mt[0] = mt[623]; i = 1; }
  }
  mt[0] = 0x80000000u;
  return mt;
}
c10::IValue int_tuple(const std::vector<uint32_t>& words, std::optional<int64_t> tail = std::nullopt) {
  std::vector<c10::IValue> items;
  for (const uint32_t word : words) items.emplace_back(static_cast<int64_t>(word));
  if (tail) items.emplace_back(*tail);
  return c10::ivalue::Tuple::create(std::move(items));
}
c10::IValue python_random_state() {
  auto& carried = python_generators();
  std::lock_guard<std::mutex> lock(carried.mutex);
  if (carried.random_state) return *carried.random_state;
  return c10::ivalue::Tuple::create({int64_t(3), int_tuple(init_by_array({0}), 624), c10::IValue()});
}
c10::IValue numpy_random_state() {
  auto& carried = python_generators();
  std::lock_guard<std::mutex> lock(carried.mutex);
  if (carried.numpy_state) return *carried.numpy_state;
  return c10::ivalue::Tuple::create({std::string("MT19937"), int_tuple(init_genrand(0)), int64_t(624), int64_t(0), 0.0});
}
// np.random.set_state takes the key as any sequence of ints: read_torch_save made the array a
// tensor, written back as a tuple (no NumPy globals, so torch.load(weights_only=True) reads it).
c10::IValue numpy_state_for_pickle(c10::IValue state) {
  if (!state.isTuple()) return state;
  auto items = state.toTupleRef().elements().vec();
  for (auto& item : items) {
    if (!item.isTensor()) continue;
    std::vector<c10::IValue> ints;
    auto flat = item.toTensor().to(at::kLong).contiguous();
    for (int64_t i = 0; i < flat.numel(); ++i) ints.emplace_back(flat.data_ptr<int64_t>()[i]);
    item = c10::ivalue::Tuple::create(std::move(ints));
  }
  return c10::ivalue::Tuple::create(std::move(items));
}

// libtorch's LRScheduler keeps its step count protected; the registry reaches it through the
// entry's own save/load pair ("step_count"), so this goes through an archive in memory.
int64_t scheduler_step(const CheckpointRegistry::Entry& entry) {
  torch::serialize::OutputArchive out;
  entry.save(out);
  std::ostringstream bytes;
  out.save_to(bytes);
  torch::serialize::InputArchive in;
  std::istringstream input(bytes.str());
  in.load_from(input);
  c10::IValue value;
  in.read("step_count", value);
  return value.toInt();
}
void set_scheduler_step(const CheckpointRegistry::Entry& entry, int64_t step) {
  torch::serialize::OutputArchive out;
  out.write("step_count", c10::IValue(step));
  std::ostringstream bytes;
  out.save_to(bytes);
  torch::serialize::InputArchive in;
  std::istringstream input(bytes.str());
  in.load_from(input);
  entry.load(in);
}

// PyTorch's LRScheduler.state_dict() as far as libtorch knows it. base_lrs are left out: the
// Python scheduler keeps those it was built with. lr_lambdas: LambdaLR.load_state_dict needs the
// key (None: a plain function, nothing to restore).
c10::IValue python_scheduler_state(int64_t step) {
  auto state = python_dict();
  state.insert(std::string("last_epoch"), step);
  state.insert(std::string("_step_count"), step + 1);
  state.insert(std::string("_is_initial"), false);
  state.insert(std::string("_get_lr_called_within_step"), false);
  auto lambdas = python_list();
  lambdas.push_back(c10::IValue());
  state.insert(std::string("lr_lambdas"), lambdas);
  return state;
}

c10::IValue random_states(const CheckpointContext& context) {
  auto states = python_dict();
  for (const auto& [name, value] : context.counters) states.insert(name, value);
  states.insert(std::string("random_state"), python_random_state());
  states.insert(std::string("numpy_random_seed"), numpy_state_for_pickle(numpy_random_state()));
  const auto all = rng_generators();
  auto cuda = python_list();
  for (size_t i = 0; i < all.size(); ++i) {
    auto generator = all[i];
    std::lock_guard<std::mutex> lock(generator.mutex());
    if (i == 0) {
      states.insert(std::string("torch_manual_seed"), generator.get_state());
    } else {
      cuda.push_back(generator.get_state());
    }
  }
  if (all.size() > 1) states.insert(std::string("torch_cuda_manual_seed"), cuda);
  return states;
}

c10::IValue field(const c10::impl::GenericDict& dict, const std::string& key) {
  const c10::IValue name{key};
  return dict.contains(name) ? dict.at(name) : c10::IValue();
}

void load_random_states(CheckpointContext& context, const std::string& path) {
  const auto value = read_torch_save(path);
  if (!value.isGenericDict()) throw CheckpointError("acc: '" + path + "' is not Accelerate's dict of random states");
  const auto states = value.toGenericDict();
  for (auto& [name, counter] : context.counters) {
    const auto stored = field(states, name);
    if (stored.isInt()) counter = stored.toInt();
  }
  const auto all = rng_generators();
  auto restore = [&](size_t index, const c10::IValue& state, const char* key) {
    if (!state.isTensor() || state.toTensor().scalar_type() != at::kByte) {
      throw CheckpointError("acc: '" + std::string(key) + "' in '" + path + "' is not a generator state (a uint8 tensor)");
    }
    auto generator = all[index];
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(state.toTensor());
  };
  const auto cpu = field(states, "torch_manual_seed");
  if (!cpu.isNone()) restore(0, cpu, "torch_manual_seed");
  const auto cuda = field(states, "torch_cuda_manual_seed");
  if (cuda.isList()) {
    const auto list = cuda.toListRef();
    for (size_t i = 0; i < list.size() && i + 1 < all.size(); ++i) restore(i + 1, list[i], "torch_cuda_manual_seed");
  }
  auto& carried = python_generators();
  std::lock_guard<std::mutex> lock(carried.mutex);
  if (const auto random = field(states, "random_state"); !random.isNone()) carried.random_state = random;
  if (const auto numpy = field(states, "numpy_random_seed"); !numpy.isNone()) carried.numpy_state = numpy;
}

void load_model_tensors(torch::nn::Module& model, const std::string& directory, size_t index) {
  const auto safe = (fs::path(directory) / numbered("model", index, ".safetensors")).string();
  const auto pickle = (fs::path(directory) / numbered("pytorch_model", index, ".bin")).string();
  std::map<std::string, at::Tensor> tensors;
  std::string source;
  if (fs::exists(safe)) {
    source = safe;
    for (auto& [name, tensor] : safetensors::load_file(safe)) tensors.emplace(name, tensor);
  } else if (fs::exists(pickle)) {
    source = pickle;
    const auto value = read_torch_save(pickle);
    if (!value.isGenericDict()) throw CheckpointError("acc: '" + pickle + "' is not a state_dict (a dict of tensors)");
    for (const auto& entry : value.toGenericDict()) {
      if (!entry.key().isString() || !entry.value().isTensor()) {
        throw CheckpointError("acc: '" + pickle + "' holds an entry that is not a name -> tensor pair");
      }
      tensors.emplace(entry.key().toStringRef(), entry.value().toTensor());
    }
  } else {
    require_checkpoint_file(safe);
  }
  // A DDP run's names: "module." before each (the model here is not wrapped).
  const bool all_prefixed = !tensors.empty() && std::all_of(tensors.begin(), tensors.end(), [](const auto& entry) {
    return entry.first.rfind(kDdpPrefix, 0) == 0;
  });
  if (all_prefixed) {
    std::map<std::string, at::Tensor> stripped;
    for (auto& [name, tensor] : tensors) stripped.emplace(name.substr(kDdpPrefix.size()), std::move(tensor));
    tensors = std::move(stripped);
  }
  load_named_tensors(model, std::move(tensors), source, /*strict=*/true);
}

}  // namespace

bool is_accelerate_checkpoint(const std::string& directory) {
  // Whatever stands at the name (a FIFO, a link): the layout is Accelerate's, and reading the file
  // names what is wrong with it.
  return fs::exists(fs::symlink_status(fs::path(directory) / rng_file(0)));
}

void save_accelerate_state(const CheckpointContext& context, bool writer, const StateDictLayout::FileFor& file) {
  const CheckpointRegistry& registry = *context.registry;
  const PartialState& state = *context.state;
  if (!context.layout->whole_tensors()) {
    throw CheckpointError("acc: save_state in Accelerate's format (CheckpointFormat::Accelerate) holds whole tensors; "
                          "under FSDP use the default CheckpointFormat::Acc (SHARDED_STATE_DICT and "
                          "FULL_STATE_DICT are acc's layouts)");
  }
  const std::string prefix = state.num_processes() > 1 ? kDdpPrefix : "";
  if (writer) {
    for (size_t i = 0; i < registry.models().size(); ++i) {
      save_model_file_with_prefix(*registry.models()[i], file(numbered("model", i, ".safetensors")), prefix);
    }
    for (size_t i = 0; i < registry.optimizers().size(); ++i) {
      write_torch_save(python_optimizer_state(*registry.optimizers()[i]), file(numbered("optimizer", i, ".bin")));
    }
    for (size_t i = 0; i < registry.schedulers().size(); ++i) {
      write_torch_save(python_scheduler_state(scheduler_step(registry.schedulers()[i])),
                       file(numbered("scheduler", i, ".bin")));
    }
    for (size_t i = 0; i < registry.custom().size(); ++i) {
      torch::serialize::OutputArchive archive;
      registry.custom()[i].save(archive);
      archive.save_to(file(custom_file(i)));
    }
  }
  write_torch_save(random_states(context), file(rng_file(state.process_index())));
  if (const auto loaders = registry.data_loaders(); !loaders.empty()) {
    const auto positions = gather_loader_positions(loaders);  // collective
    for (size_t i = 0; writer && i < loaders.size(); ++i) save_loader_position(positions, i, file(loader_file(i)));
  }
}

void load_accelerate_state(CheckpointContext& context, const std::string& directory) {
  const CheckpointRegistry& registry = *context.registry;
  const PartialState& state = *context.state;
  const fs::path dir(directory);
  if (!context.layout->whole_tensors()) {
    throw CheckpointError("acc: '" + directory + "' is in Accelerate's layout, which acc loads with whole tensors; "
                          "under FSDP load acc's own checkpoints (CheckpointFormat::Acc)");
  }
  for (size_t i = 0; i < registry.models().size(); ++i) load_model_tensors(*registry.models()[i], directory, i);
  for (size_t i = 0; i < registry.optimizers().size(); ++i) {
    const auto path = (dir / numbered("optimizer", i, ".bin")).string();
    require_checkpoint_file(path);
    load_python_optimizer_state(*registry.optimizers()[i], read_torch_save(path), path);
  }
  for (size_t i = 0; i < registry.schedulers().size(); ++i) {
    const auto path = (dir / numbered("scheduler", i, ".bin")).string();
    require_checkpoint_file(path);
    const auto value = read_torch_save(path);
    const auto last_epoch = value.isGenericDict() ? field(value.toGenericDict(), "last_epoch") : c10::IValue();
    if (!last_epoch.isInt()) throw CheckpointError("acc: '" + path + "' is not an LRScheduler state_dict (no last_epoch)");
    set_scheduler_step(registry.schedulers()[i], last_epoch.toInt());
  }
  // What has no C++ counterpart: listed once, loading goes on without it.
  std::vector<std::string> left;
  std::vector<std::string> present;
  for (const auto& entry : fs::directory_iterator(dir)) present.push_back(entry.path().filename().string());
  std::sort(present.begin(), present.end());
  static const std::regex python_only(R"((custom_checkpoint_\d+\.pkl|sampler(_\d+)?\.bin|dl_state_dict(_\d+)?\.bin|scaler\.pt|pytorch_model_fsdp_\d+|optimizer_\d+_fsdp.*|.*deepspeed.*))");
  for (const auto& name : present) {
    if (std::regex_match(name, python_only)) left.push_back(name);
  }
  for (size_t i = 0; i < registry.custom().size(); ++i) {
    const auto path = (dir / custom_file(i)).string();
    if (!fs::exists(path)) {
      left.push_back("(no " + custom_file(i) + ": registered object " + std::to_string(i) + " keeps its state)");
      continue;
    }
    auto archive = read_archive(path, c10::Device(c10::kCPU));
    read_values(path, [&] { registry.custom()[i].load(archive); });
  }
  const auto loaders = registry.data_loaders();
  for (size_t i = 0; i < loaders.size(); ++i) {
    const auto path = (dir / loader_file(i)).string();
    if (fs::exists(path)) {
      load_loader_position(*loaders[i], path, state.process_index(), state.num_processes());
    } else {
      left.push_back("(no " + loader_file(i) + ": data loader " + std::to_string(i) + " starts afresh)");
    }
  }
  const auto rng = (dir / rng_file(state.process_index())).string();
  require_checkpoint_file(rng);
  load_random_states(context, rng);
  if (!left.empty()) {
    std::string list;
    for (const auto& name : left) list += (list.empty() ? "" : ", ") + name;
    warn("acc: load_state('" + directory + "') restored the model, optimizer, scheduler and torch generator "
         "states of this Accelerate checkpoint; what has no C++ counterpart was not restored: " + list +
         " (docs/checkpointing.md, \"What cannot cross\")");
  }
}

}  // namespace acc::detail

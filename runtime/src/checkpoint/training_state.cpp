// save_state / load_state: the files of a training checkpoint, who writes them, and the
// automatic naming and rotation of ProjectConfiguration.
#include "checkpoint/training_state.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <regex>

#include <acc/checkpointing.h>
#include <acc/collectives.h>
#include <acc/errors.h>
#include <acc/state.h>
#include <acc/warnings.h>
#include <acc_common/new_file.h>

#include "checkpoint/accelerate_format.h"
#include "checkpoint/archive_file.h"
#include "checkpoint/checksums.h"
#include "checkpoint/directory.h"
#include "checkpoint/file_names.h"
#include "checkpoint/file_io.h"
#include "checkpoint/loader_positions.h"
#include "checkpoint/state_dict_layout.h"

namespace fs = std::filesystem;

namespace acc::detail {
namespace {

std::string rank_file(int rank) { return "random_states_" + std::to_string(rank) + ".bin"; }

void save_archive(const SaveFunction& save, const std::string& path) {
  torch::serialize::OutputArchive archive;
  save(archive);
  archive.save_to(path);
}

void load_archive(const LoadFunction& load, const std::string& path, c10::Device device) {
  require_checkpoint_file(path);
  auto archive = read_archive(path, device);
  read_values(path, [&] { load(archive); });
}

void save_rank_state(const CheckpointContext& context, const std::string& path) {
  save_archive(
      [&](torch::serialize::OutputArchive& archive) {
        const auto all = rng_generators();
        for (size_t i = 0; i < all.size(); ++i) {
          auto generator = all[i];
          std::lock_guard<std::mutex> lock(generator.mutex());
          archive.write("generator_" + std::to_string(i), generator.get_state());
        }
        archive.write("num_generators", c10::IValue(static_cast<int64_t>(all.size())));
        for (const auto& [name, value] : context.counters) archive.write("counter_" + name, c10::IValue(value));
      },
      path);
}

void load_rank_state(CheckpointContext& context, const std::string& path) {
  load_archive(
      [&](torch::serialize::InputArchive& archive) {
        c10::IValue count;
        archive.read("num_generators", count);
        const auto all = rng_generators();
        if (count.toInt() != static_cast<int64_t>(all.size())) {
          warn("'" + path + "' holds " + std::to_string(count.toInt()) +
               " generator states but this process has " + std::to_string(all.size()) +
               " (other CUDA devices); restoring the CPU generator and the common ones");
        }
        for (int64_t i = 0; i < std::min<int64_t>(count.toInt(), all.size()); ++i) {
          at::Tensor state;
          archive.read("generator_" + std::to_string(i), state);
          auto generator = all[i];
          std::lock_guard<std::mutex> lock(generator.mutex());
          generator.set_state(state);
        }
        for (auto& [name, value] : context.counters) {
          c10::IValue stored;
          if (archive.try_read("counter_" + name, stored)) value = stored.toInt();
        }
      },
      path, c10::Device(c10::kCPU));
}

std::optional<int64_t> checkpoint_number(const std::string& name) {
  // At most 18 digits: what int64 holds (a longer name is not one of save_state's, and std::stoll
  // would throw std::out_of_range out of load_state).
  static const std::regex pattern(R"(checkpoint_(\d{1,18}))");
  std::smatch match;
  if (!std::regex_match(name, match, pattern)) return std::nullopt;
  return std::stoll(match[1].str());
}

// Complete numbered checkpoints under {project_dir}/checkpoints, oldest first. Only real
// directories count: save_state makes nothing else there, and a link or FIFO named checkpoint_N
// (someone else's) is neither followed out, waited on, loaded nor pruned.
std::vector<std::pair<int64_t, fs::path>> numbered_checkpoints(const std::string& project_dir) {
  std::vector<std::pair<int64_t, fs::path>> out;
  const fs::path root = fs::path(project_dir) / "checkpoints";
  if (!fs::is_directory(root)) return out;
  for (const auto& entry : fs::directory_iterator(root)) {
    const auto number = checkpoint_number(entry.path().filename().string());
    if (number && entry.is_directory() && !entry.is_symlink() && is_complete_checkpoint(entry.path().string())) {
      out.emplace_back(*number, entry.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

void require_project_dir(const ProjectConfiguration& project, const char* call) {
  if (!project.automatic_checkpoint_naming() || project.project_dir().empty()) {
    throw ConfigError(std::string("acc: ") + call +
                      " without a directory needs automatic checkpoint naming: construct the "
                      "Accelerator with AcceleratorOptions().project_config(acc::ProjectConfiguration()"
                      ".project_dir(\"runs/x\").automatic_checkpoint_naming(true)), or pass a directory");
  }
}

// The directory save_state writes: the one given, or the next automatic one.
std::string save_target(const ProjectConfiguration& project, const std::string& directory) {
  if (!directory.empty()) return directory;
  require_project_dir(project, "save_state()");
  const auto target =
      (fs::path(project.project_dir()) / "checkpoints" / ("checkpoint_" + std::to_string(project.iteration()))).string();
  if (fs::exists(target)) {
    throw CheckpointError("acc: checkpoint '" + target + "' already exists; set "
                          "ProjectConfiguration::iteration past it or remove it");
  }
  return target;
}

// The directory load_state reads: the one given, or the newest complete automatic one.
std::string load_source(const ProjectConfiguration& project, const std::string& directory) {
  std::string source = directory;
  if (source.empty()) {
    require_project_dir(project, "load_state()");
    source = latest_checkpoint(project.project_dir());
    if (source.empty()) {
      throw CheckpointError("acc: load_state() found no complete checkpoint under '" +
                            (fs::path(project.project_dir()) / "checkpoints").string() +
                            "'; save one first or pass a directory");
    }
  }
  if (!fs::is_directory(source)) throw CheckpointError("acc: checkpoint directory '" + source + "' does not exist");
  // A marker that is no plain file (a FIFO, a link out) is named here rather than read as missing.
  const std::string marker = (fs::path(source) / kCheckpointCompleteMarker).string();
  if (fs::exists(fs::symlink_status(marker))) {
    const ConfinedReads confined(source);
    open_file(marker);
  }
  // Python Accelerate writes no marker (nor crash-safely): its directories are taken as they are.
  if (!is_complete_checkpoint(source) && !is_accelerate_checkpoint(source)) {
    throw CheckpointError("acc: '" + source + "' has no " + kCheckpointCompleteMarker +
                          " marker: its save was interrupted or it was not written by save_state");
  }
  return source;
}

// The random part of the temporary directory's name: drawn by process 0, the same on every process
// (they must find the directory without talking to its writer again).
std::string shared_token(const PartialState& state) {
  std::string token = common::random_hex(8);
  if (!state.use_distributed()) return token;
  auto bytes = at::empty({static_cast<int64_t>(token.size())}, at::kByte);
  std::memcpy(bytes.data_ptr(), token.data(), token.size());
  bytes = acc::broadcast(bytes.to(state.device())).cpu();
  return std::string(static_cast<const char*>(bytes.data_ptr()), token.size());
}

// Every rank's files of one checkpoint, in the temporary directory until commit(), and the list
// of what this process wrote (fsynced, and listed with their checksums, before the commit).
class CheckpointFiles {
 public:
  CheckpointFiles(const std::string& target, bool writer, const PartialState& state) {
    const std::string token = shared_token(state);
    // The writer creates the temporary directory; the others write into it after the barrier.
    if (writer) out_.emplace(target, token, /*create=*/true);
    state.wait_for_everyone();
    if (!writer) out_.emplace(target, token, /*create=*/false);
  }
  /// The path of `name`, recorded as written.
  std::string file(const std::string& name) { return written_.emplace_back(out_->file(name)); }
  template <typename How>
  void write(const std::string& name, How&& how) {
    how(file(name));
  }
  /// This process's checksum manifest and fsync of its files, a barrier, then the writer's commit
  /// (marker, rename).
  void commit(bool writer, const PartialState& state) {
    const std::string manifest = out_->file(checksum_manifest_name(state.process_index()));
    write_checksum_manifest(out_->path(), written_, manifest);
    written_.push_back(manifest);
    CheckpointDirectoryWriter::sync_files(written_);
    state.wait_for_everyone();
    if (writer) out_->commit();
    state.wait_for_everyone();
  }

 private:
  std::optional<CheckpointDirectoryWriter> out_;
  std::vector<std::string> written_;
};

// Python's tools for sharded checkpoints (torch.distributed.checkpoint's dcp_to_torch_save,
// `accelerate merge-weights`) need DCP's .metadata, a pickle of DCP's private Python classes that
// acc does not write (docs/checkpointing.md): a checkpoint with shard files says so in a README
// beside them, naming acc's own tool.
const char* kShardedReadme = "README.txt";
std::string sharded_readme() {
  return "This checkpoint was written by acc (C++) with FSDP_STATE_DICT_TYPE=SHARDED_STATE_DICT.\n"
         "\n"
         "Its shards (model.shard-R-of-N.safetensors, optimizer.shard-R-of-N.safetensors) are acc's layout, not\n"
         "torch.distributed.checkpoint's: Python's dcp_to_torch_save and `accelerate merge-weights` cannot read\n"
         "them (they look for a .metadata file). Merge them with acc's tool instead:\n"
         "\n"
         "    acc-merge-weights <this directory> <output directory>\n"
         "\n"
         "It writes <output directory>/model.safetensors (model_1.safetensors, ... for further models), what\n"
         "`accelerate merge-weights` writes: safetensors.torch.load_file or model.load_state_dict read it in Python,\n"
         "acc::load_checkpoint_in_model in C++. acc's load_state reads the shards directly, on any number of\n"
         "processes.\n";
}

bool is_shard_file(const std::string& name) { return name.find(".shard-") != std::string::npos; }

void save_objects(const CheckpointContext& context, bool writer, CheckpointFiles& files) {
  const CheckpointRegistry& registry = *context.registry;
  bool sharded = false;
  auto file = [&files, &sharded](const std::string& name) {
    sharded = sharded || is_shard_file(name);
    return files.file(name);
  };
  for (size_t i = 0; i < registry.models().size(); ++i) {
    context.layout->save_model(*registry.models()[i], numbered("model", i, ""), writer, file);
  }
  for (size_t i = 0; i < registry.optimizers().size(); ++i) {
    context.layout->save_optimizer(*registry.optimizers()[i], numbered("optimizer", i, ""), writer, file);
  }
  if (writer) {
    for (size_t i = 0; i < registry.schedulers().size(); ++i) {
      files.write(numbered("scheduler", i, ".bin"),
                  [&](const std::string& path) { save_archive(registry.schedulers()[i].save, path); });
    }
    for (size_t i = 0; i < registry.custom().size(); ++i) {
      files.write("custom_checkpoint_" + std::to_string(i) + ".bin",
                  [&](const std::string& path) { save_archive(registry.custom()[i].save, path); });
    }
  }
  if (writer && sharded) {
    files.write(kShardedReadme, [](const std::string& path) { write_text_file(path, sharded_readme()); });
  }
  files.write(rank_file(context.state->process_index()),
              [&](const std::string& path) { save_rank_state(context, path); });
  if (const auto loaders = registry.data_loaders(); !loaders.empty()) {
    const auto positions = gather_loader_positions(loaders);  // collective
    for (size_t i = 0; writer && i < loaders.size(); ++i) {
      files.write(numbered("sampler", i, ".bin"),
                  [&](const std::string& path) { save_loader_position(positions, i, path); });
    }
  }
}

// Rotation only after the new checkpoint is complete: a crash never leaves fewer. Each removal is
// a rename to the trash first, so a kill leaves the checkpoint or trash (removed by the next save),
// never a checkpoint_N half gone. Directories checkpoint_N below the newest that lack the marker are
// what acc before the trash left when killed while pruning: removed too.
void remove_old_checkpoints(const ProjectConfiguration& project, int64_t saved) {
  const fs::path root = fs::path(project.project_dir()) / "checkpoints";
  for (const auto& entry : fs::directory_iterator(root)) {
    const auto number = checkpoint_number(entry.path().filename().string());
    if (number && *number < saved && fs::is_directory(fs::symlink_status(entry.path())) &&
        !is_complete_checkpoint(entry.path().string())) {
      remove_checkpoint(entry.path().string());
    }
  }
  if (!project.total_limit() || *project.total_limit() <= 0) return;
  auto all = numbered_checkpoints(project.project_dir());
  const auto limit = static_cast<size_t>(*project.total_limit());
  for (size_t i = 0; i + limit < all.size(); ++i) remove_checkpoint(all[i].second.string());
}

}  // namespace

std::vector<at::Generator> rng_generators() {
  std::vector<at::Generator> out{at::detail::getDefaultCPUGenerator()};
  if (at::globalContext().hasCUDA()) {
    for (c10::DeviceIndex i = 0; i < at::detail::getCUDAHooks().deviceCount(); ++i) {
      out.push_back(at::globalContext().defaultGenerator(c10::Device(c10::kCUDA, i)));
    }
  }
  return out;
}

void require_checkpoint_file(const std::string& path) {
  if (!fs::exists(path)) {
    throw CheckpointError("acc: the checkpoint has no '" + path +
                          "'; it was saved with other prepared or registered objects (or another "
                          "number of processes) than this program has");
  }
}

std::string save_training_state(CheckpointContext& context, const std::string& directory) {
  const PartialState& state = *context.state;
  ProjectConfiguration& project = *context.project;
  const std::string target = save_target(project, directory);
  const bool writer = project.save_on_each_node() ? state.is_local_main_process() : state.is_main_process();
  CheckpointFiles files(target, writer, state);
  if (project.checkpoint_format() == CheckpointFormat::Accelerate) {
    save_accelerate_state(context, writer, [&files](const std::string& name) { return files.file(name); });
  } else {
    save_objects(context, writer, files);
  }
  files.commit(writer, state);
  if (directory.empty()) {
    if (writer) remove_old_checkpoints(project, project.iteration());
    project.iteration(project.iteration() + 1);
  }
  return target;
}

std::string load_training_state(CheckpointContext& context, const std::string& directory) {
  const PartialState& state = *context.state;
  ProjectConfiguration& project = *context.project;
  const CheckpointRegistry& registry = *context.registry;
  const std::string source = load_source(project, directory);
  const fs::path dir(source);
  // Every file below is opened through open_file: none that leads out of the checkpoint is read.
  const ConfinedReads confined(source);
  const ChecksumVerification verification(source, project.verify_checksums());
  if (is_accelerate_checkpoint(source)) {
    load_accelerate_state(context, source);
    const auto number = checkpoint_number(dir.filename().string());
    if (project.automatic_checkpoint_naming() && number) project.iteration(*number + 1);
    return source;
  }
  for (size_t i = 0; i < registry.models().size(); ++i) {
    context.layout->load_model(*registry.models()[i], source, numbered("model", i, ""));
  }
  for (size_t i = 0; i < registry.optimizers().size(); ++i) {
    context.layout->load_optimizer(*registry.optimizers()[i], source, numbered("optimizer", i, ""), context.device);
  }
  for (size_t i = 0; i < registry.schedulers().size(); ++i) {
    load_archive(registry.schedulers()[i].load, (dir / numbered("scheduler", i, ".bin")).string(), context.device);
  }
  for (size_t i = 0; i < registry.custom().size(); ++i) {
    load_archive(registry.custom()[i].load, (dir / ("custom_checkpoint_" + std::to_string(i) + ".bin")).string(),
                 c10::Device(c10::kCPU));
  }
  const auto loaders = registry.data_loaders();
  for (size_t i = 0; i < loaders.size(); ++i) {
    load_loader_position(*loaders[i], (dir / numbered("sampler", i, ".bin")).string(), state.process_index(),
                         state.num_processes());
  }
  load_rank_state(context, (dir / rank_file(state.process_index())).string());
  const auto number = checkpoint_number(dir.filename().string());
  if (project.automatic_checkpoint_naming() && number) project.iteration(*number + 1);
  return source;
}

}  // namespace acc::detail

namespace acc {

std::string latest_checkpoint(const std::string& project_dir) {
  const auto all = detail::numbered_checkpoints(project_dir);
  return all.empty() ? std::string() : all.back().second.string();
}

}  // namespace acc

// The plain state-dict layout: every process holds whole tensors (one process, DDP), so the writer
// saves them as they are and every process loads the same files.
#include <filesystem>

#include <acc/checkpoint_model.h>

#include "checkpoint/optimizer_files.h"
#include "checkpoint/state_dict_layout.h"
#include "checkpoint/training_state.h"

namespace fs = std::filesystem;

namespace acc::detail {
namespace {

class PlainStateDictLayout : public StateDictLayout {
 public:
  bool whole_tensors() const override { return true; }

  void save_model(torch::nn::Module& model, const std::string& stem, bool writer, const FileFor& file) override {
    if (writer) save_model_file(model, file(stem + ".safetensors"));
  }

  void save_optimizer(torch::optim::Optimizer& optimizer, const std::string& stem, bool writer,
                      const FileFor& file) override {
    if (writer) save_optimizer_state(optimizer, file(stem + ".safetensors"), file(stem + ".libtorch.bin"));
  }

  void load_model(torch::nn::Module& model, const std::string& directory, const std::string& stem) override {
    const auto path = (fs::path(directory) / (stem + ".safetensors")).string();
    require_checkpoint_file(path);
    load_checkpoint_in_model(model, path, /*strict=*/true);
  }

  void load_optimizer(torch::optim::Optimizer& optimizer, const std::string& directory, const std::string& stem,
                      c10::Device device) override {
    const auto tensors = (fs::path(directory) / (stem + ".safetensors")).string();
    const auto rest = (fs::path(directory) / (stem + ".libtorch.bin")).string();
    require_checkpoint_file(tensors);
    require_checkpoint_file(rest);
    load_optimizer_state(optimizer, tensors, rest, device);
  }

  void save_weights(const torch::nn::Module& model, const std::string& directory, const std::string& max_shard_size,
                    bool safe_serialization, bool writer) override {
    if (writer) acc::save_model(model, directory, max_shard_size, safe_serialization);
  }
};

}  // namespace

std::unique_ptr<StateDictLayout> make_plain_state_dict_layout() { return std::make_unique<PlainStateDictLayout>(); }

}  // namespace acc::detail

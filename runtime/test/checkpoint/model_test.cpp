// save_model / load_checkpoint_in_model: the Hub layout, checked by Python Accelerate's own
// load_checkpoint_in_model, and Python Accelerate's save_model read back by acc.
#include <acc/checkpoint_model.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace fs = std::filesystem;
using acc::testing::bytes_hex;
using acc::testing::run_python;
using acc::testing::ScratchDir;

namespace {

// The same structure as the Python model below: names 0.weight, 0.bias, 1.weight, ...
torch::nn::Sequential make_model(int64_t seed) {
  torch::manual_seed(seed);
  return torch::nn::Sequential(torch::nn::Linear(16, 32), torch::nn::BatchNorm1d(32),
                               torch::nn::Linear(32, 4));
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

const char* kPythonModel = R"(
import json, sys, torch
from accelerate import Accelerator
from accelerate.utils import load_checkpoint_in_model
def make_model():
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.BatchNorm1d(32), torch.nn.Linear(32, 4))
def hexes(model):
    return {k: v.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes().hex()
            for k, v in model.state_dict().items()}
)";

}  // namespace

TEST(SaveModel, StateOrderAndNamesMatchPyTorch) {
  auto model = make_model(0);
  std::vector<std::string> names;
  for (const auto& [name, tensor] : acc::model_state(*model)) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean",
                                             "1.running_var", "1.num_batches_tracked", "2.weight",
                                             "2.bias"}));
}

TEST(SaveModel, ParsesShardSizesAsTheHubDoes) {
  EXPECT_EQ(acc::parse_shard_size("10GB"), 10'000'000'000u);
  EXPECT_EQ(acc::parse_shard_size("5MB"), 5'000'000u);
  EXPECT_EQ(acc::parse_shard_size("1.5KB"), 1'500u);
  EXPECT_EQ(acc::parse_shard_size("2GiB"), 2u << 30);
  EXPECT_EQ(acc::parse_shard_size("1000"), 1000u);
  try {
    acc::parse_shard_size("10 parsecs");
    FAIL();
  } catch (const acc::ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("max_shard_size '10 parsecs' is not a size"), std::string::npos);
  }
}

TEST(SaveModel, ShardsGreedilyWithTheHubsNamesAndPythonAccelerateLoadsThem) {
  ScratchDir dir;
  auto model = make_model(1);
  model->to(torch::kDouble);  // shard sizes depend on bytes, not element counts
  // 0.weight is 4096 bytes: over the 3000-byte limit, so it gets a shard of its own.
  acc::save_model(model, dir.path(), "3KB");
  const auto files = files_in(dir.path());
  ASSERT_GE(files.size(), 3u);
  EXPECT_EQ(files.back(), "model.safetensors.index.json");
  const size_t shards = files.size() - 1;
  for (size_t i = 0; i < shards; ++i) {
    char expected[64];
    std::snprintf(expected, sizeof(expected), "model-%05zu-of-%05zu.safetensors", i + 1, shards);
    EXPECT_EQ(files[i], expected);
  }
  const auto index = nlohmann::json::parse(std::ifstream(dir / "model.safetensors.index.json"));
  uint64_t total = 0;
  for (const auto& [name, tensor] : acc::model_state(*model)) total += tensor.nbytes();
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), total);
  EXPECT_EQ(index["weight_map"]["0.weight"], "model-00001-of-" + std::string(files[0]).substr(15, 5) + ".safetensors");

  nlohmann::json expected;
  for (const auto& [name, tensor] : acc::model_state(*model)) expected[name] = bytes_hex(tensor);
  std::ofstream(dir / "../expected.json") << expected.dump();
  const auto result = run_python(std::string(kPythonModel) + R"(
model = make_model().double()
load_checkpoint_in_model(model, sys.argv[1], strict=True)
expected = json.load(open(sys.argv[2]))
print("OK" if hexes(model) == expected else "MISMATCH")
)", dir.path() + " " + dir.path() + "/../expected.json");
  fs::remove(dir / "../expected.json");
  EXPECT_EQ(result.output, "OK\n") << result.output;
}

TEST(SaveModel, ReadsWhatPythonAccelerateSaves) {
  ScratchDir dir;
  for (const std::string limit : {"10GB", "2KB"}) {
    const std::string out = dir / ("py_" + limit);
    const auto result = run_python(std::string(kPythonModel) + R"(
torch.manual_seed(3)
model = make_model()
model.train(); model(torch.randn(8, 16))  # non-trivial BatchNorm statistics
Accelerator(cpu=True).save_model(model, sys.argv[1], max_shard_size=sys.argv[2])
json.dump(hexes(model), open(sys.argv[1] + ".json", "w"))
)", out + " " + limit);
    ASSERT_EQ(result.exit_code, 0) << result.output;
    auto model = make_model(99);
    const auto report = acc::load_checkpoint_in_model(model, out);
    EXPECT_TRUE(report.ok()) << report.describe();
    const auto expected = nlohmann::json::parse(std::ifstream(out + ".json"));
    for (const auto& [name, tensor] : acc::model_state(*model)) {
      EXPECT_EQ(bytes_hex(tensor), expected[name].get<std::string>()) << limit << " " << name;
    }
    EXPECT_EQ(fs::exists(out + "/model.safetensors.index.json"), limit == "2KB");
  }
}

TEST(SaveModel, RemovesStaleShardsWhenTheLayoutChanges) {
  ScratchDir dir;
  auto model = make_model(2);
  acc::save_model(model, dir.path(), "1KB");
  ASSERT_GT(files_in(dir.path()).size(), 2u);
  std::ofstream(dir / "notes.txt") << "kept";
  acc::save_model(model, dir.path());
  EXPECT_EQ(files_in(dir.path()), (std::vector<std::string>{"model.safetensors", "notes.txt"}));
  acc::save_model(model, dir.path(), "1KB");
  const auto files = files_in(dir.path());
  EXPECT_EQ(std::count(files.begin(), files.end(), "model.safetensors"), 0);
  EXPECT_EQ(std::count(files.begin(), files.end(), "model.safetensors.index.json"), 1);
}

TEST(SaveModel, PickleFormatRoundTripsAndTorchLoadReadsIt) {
  ScratchDir dir;
  auto model = make_model(4);
  acc::save_model(model, dir.path(), "10GB", /*safe_serialization=*/false);
  EXPECT_EQ(files_in(dir.path()), (std::vector<std::string>{"pytorch_model.bin"}));
  auto loaded = make_model(5);
  acc::load_checkpoint_in_model(loaded, dir.path());
  for (const auto& [name, tensor] : acc::model_state(*loaded)) {
    EXPECT_TRUE(torch::equal(tensor, model->named_parameters().contains(name)
                                         ? model->named_parameters()[name]
                                         : model->named_buffers()[name]))
        << name;
  }
  const auto result = run_python(R"(
import sys, torch
# libtorch's pickler tags typed dicts (torch.jit._pickle.restore_type_tag), which torch.load's
# weights_only mode rejects: the file is trusted here.
sd = torch.load(sys.argv[1] + "/pytorch_model.bin", weights_only=False)
print(sorted(sd)[:2], tuple(sd["0.weight"].shape))
)", dir.path());
  EXPECT_EQ(result.output, "['0.bias', '0.weight'] (32, 16)\n") << result.output;
}

TEST(LoadCheckpoint, ListsMissingUnexpectedAndMisShapedKeys) {
  ScratchDir dir;
  auto saved = torch::nn::Sequential(torch::nn::Linear(4, 8), torch::nn::Linear(8, 2));
  acc::save_model(saved, dir.path());
  auto other = torch::nn::Sequential(torch::nn::Linear(4, 6), torch::nn::Linear(6, 2),
                                     torch::nn::Linear(2, 2));
  const auto before = other[0]->as<torch::nn::Linear>()->bias.clone();
  try {
    acc::load_checkpoint_in_model(other, dir.path());
    FAIL() << "no error";
  } catch (const acc::CheckpointError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("missing keys (in the model, not in the checkpoint): 2.weight 2.bias"), std::string::npos) << message;
    EXPECT_NE(message.find("0.weight (model [6, 4], checkpoint [8, 4])"), std::string::npos) << message;
    EXPECT_NE(message.find("1.weight (model [2, 6], checkpoint [2, 8])"), std::string::npos) << message;
  }
  EXPECT_TRUE(torch::equal(before, other[0]->as<torch::nn::Linear>()->bias)) << "nothing is loaded on error";

  auto bigger = torch::nn::Sequential(torch::nn::Linear(4, 8));
  const auto report = acc::load_checkpoint_in_model(bigger, dir.path(), /*strict=*/false);
  EXPECT_EQ(report.unexpected_keys, (std::vector<std::string>{"1.bias", "1.weight"}));
  EXPECT_TRUE(torch::equal(bigger[0]->as<torch::nn::Linear>()->weight, saved[0]->as<torch::nn::Linear>()->weight));
  EXPECT_THROW(acc::load_checkpoint_in_model(bigger, dir / "absent"), acc::CheckpointError);
}

namespace {
struct TiedImpl : torch::nn::Module {
  TiedImpl() {
    embed = register_module("embed", torch::nn::Embedding(10, 4));
    head = register_module("head", torch::nn::Linear(torch::nn::LinearOptions(4, 10).bias(false)));
    torch::NoGradGuard no_grad;
    head->weight.set_data(embed->weight);  // weight tying: one storage, two names
  }
  torch::nn::Embedding embed{nullptr};
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(Tied);
}  // namespace

TEST(SaveModel, WritesTiedWeightsOnceAndRestoresBoth) {
  ScratchDir dir;
  Tied model;
  acc::save_model(model, dir.path());
  EXPECT_EQ(acc::safetensors::MappedFile(dir / "model.safetensors").names(),
            (std::vector<std::string>{"embed.weight"}));
  Tied loaded;
  const auto report = acc::load_checkpoint_in_model(loaded, dir.path());
  EXPECT_TRUE(report.ok()) << report.describe();
  EXPECT_TRUE(torch::equal(loaded->head->weight, model->embed->weight));
  EXPECT_EQ(loaded->head->weight.data_ptr(), loaded->embed->weight.data_ptr());
}

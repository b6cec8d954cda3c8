// load_checkpoint_and_dispatch, dispatch_model and the offload shortcuts on one process: outputs
// bit-identical to the fully loaded model under every map, weights where the map says, and errors
// that name the weight or module.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <acc/accelerator.h>
#include <acc/big_modeling.h>
#include <acc/checkpoint_model.h>
#include <acc/hooks.h>
#include <acc/state.h>
#include <acc/testing.h>

#include "big_model.h"
#include "hooks/hook_registry.h"
#include "error_text.h"
#include "test_util.h"

namespace fs = std::filesystem;
using acc::testing::ScratchDir;

namespace {

torch::nn::Sequential empty_sequential() {
  acc::init_empty_weights empty;
  return acc::testing::sequential_lm();
}

acc::testing::GuardedLM empty_tiny() {
  acc::init_empty_weights empty;
  return acc::testing::GuardedLM();
}

bool all_meta(torch::nn::Module& module) {
  for (const auto& p : module.parameters()) {
    if (!p.is_meta()) return false;
  }
  return true;
}

bool none_meta(torch::nn::Module& module) { return !acc::has_meta_tensors(module); }

std::string message_of(const std::function<void()>& action) { return acc::testing::error_text(action); }

class Dispatch : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::manual_seed(0);
    reference = acc::testing::sequential_lm();
    acc::save_model(reference, checkpoint, "40KB");
    ids = torch::randint(0, acc::testing::kVocab, {2, 8});
    torch::NoGradGuard no_grad;
    expected = reference->forward(ids);
  }
  torch::Tensor run(torch::nn::Sequential& model) {
    torch::NoGradGuard no_grad;
    return model->forward(ids);
  }

  ScratchDir dir;
  std::string checkpoint = dir / "checkpoint";
  torch::nn::Sequential reference{nullptr};
  torch::Tensor ids, expected;
};

TEST_F(Dispatch, CheckpointIsShardedForTheseTests) {
  EXPECT_TRUE(fs::exists(dir / "checkpoint/model.safetensors.index.json"));
}

TEST_F(Dispatch, AllOnCpuIsBitIdentical) {
  auto model = empty_sequential();
  const auto report = acc::load_checkpoint_and_dispatch(model, checkpoint, "cpu");
  EXPECT_TRUE(none_meta(*model));
  EXPECT_TRUE(torch::equal(run(model), expected));
  ASSERT_EQ(report.bytes_per_device.size(), 1u);
  EXPECT_EQ(report.bytes_per_device[0].first, "cpu");
}

TEST_F(Dispatch, HalfCpuHalfDiskIsBitIdenticalAndDiskWeightsRestEmpty) {
  auto model = empty_sequential();
  const acc::DeviceMap map{{"embed", "cpu"},   {"block0", "cpu"},  {"block1", "cpu"},
                           {"block2", "disk"}, {"block3", "disk"}, {"norm", "disk"},
                           {"head", "disk"}};
  acc::load_checkpoint_and_dispatch(model, checkpoint, map);
  auto block2 = model->named_children()["block2"];
  EXPECT_TRUE(none_meta(*model->named_children()["block1"]));
  EXPECT_TRUE(all_meta(*block2)) << "a disk module a Sequential calls rests empty";

  bool mapped_during_forward = false;
  acc::register_forward_pre_hook(*block2, [&](torch::nn::Module& m) { mapped_during_forward = none_meta(m); });
  EXPECT_TRUE(torch::equal(run(model), expected));
  EXPECT_TRUE(mapped_during_forward);
  EXPECT_TRUE(all_meta(*block2)) << "released again after its forward";
  EXPECT_TRUE(torch::equal(run(model), expected));
}

TEST_F(Dispatch, AllOnDiskIsBitIdentical) {
  auto model = empty_sequential();
  const auto report = acc::load_checkpoint_and_dispatch(model, checkpoint, "disk");
  EXPECT_TRUE(torch::equal(run(model), expected));
  ASSERT_FALSE(report.bytes_per_device.empty());
  EXPECT_EQ(report.bytes_per_device[0].first, "disk");
}

TEST_F(Dispatch, AutoWithLittleMemorySpillsToDiskAndIsBitIdentical) {
  auto model = empty_sequential();
  const auto report = acc::load_checkpoint_and_dispatch(
      model, checkpoint, "auto",
      acc::DispatchOptions()
          .max_memory(acc::parse_max_memory({{"cpu", "70KB"}}))
          .no_split_module_classes({"TransformerBlock"}));
  const auto devices = report.device_map.devices();
  EXPECT_NE(std::find(devices.begin(), devices.end(), "cpu"), devices.end()) << report.device_map;
  EXPECT_NE(std::find(devices.begin(), devices.end(), "disk"), devices.end()) << report.device_map;
  EXPECT_TRUE(torch::equal(run(model), expected));
}

TEST_F(Dispatch, GuardLineModulesReleaseAfterTheirFirstForwardAndOthersStayMapped) {
  torch::manual_seed(1);
  acc::testing::GuardedLM tiny_reference;
  acc::save_model(tiny_reference, dir / "tiny", "40KB");
  torch::Tensor tiny_expected;
  {
    torch::NoGradGuard no_grad;
    tiny_expected = tiny_reference->forward(ids);
  }
  auto model = empty_tiny();
  acc::load_checkpoint_and_dispatch(model, dir / "tiny",
                                    acc::DeviceMap{{"embed", "cpu"}, {"blocks.0", "cpu"},
                                                   {"blocks.1", "disk"}, {"blocks.2", "disk"},
                                                   {"blocks.3", "disk"}, {"norm", "disk"},
                                                   {"head", "disk"}});
  // Not known to be hooked until its hooks run: resident (mapped) so that a missing guard line
  // could not break the forward.
  EXPECT_TRUE(none_meta(*model));
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(model->forward(ids), tiny_expected));
  EXPECT_TRUE(all_meta(*model->blocks[1])) << "its guard line ran its hooks: it rests empty now";
  EXPECT_TRUE(none_meta(*model->head)) << "called directly by the root: stays mapped";
  EXPECT_TRUE(torch::equal(model->forward(ids), tiny_expected));
}

TEST_F(Dispatch, CheckpointWrittenByPythonInTheHubLayout) {
  acc::save_model(reference, dir / "single");
  std::ifstream script_file(ACC_INFERENCE_TEST_DIR "/reshard_hf.py");
  std::stringstream script;
  script << script_file.rdbuf();
  const auto result = acc::testing::run_python(
      script.str(), dir / "single/model.safetensors" + std::string(" ") + dir / "hub" + " 40KB");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  ASSERT_TRUE(fs::exists(dir / "hub/model.safetensors.index.json"));
  for (const char* map : {"disk", "auto"}) {
    auto model = empty_sequential();
    acc::load_checkpoint_and_dispatch(
        model, dir / "hub", map,
        acc::DispatchOptions().max_memory(acc::parse_max_memory({{"cpu", "70KB"}})));
    EXPECT_TRUE(torch::equal(run(model), expected)) << map;
  }
}

TEST_F(Dispatch, SaveStateDirectoryOfTheAccelerator) {
  std::string state_dir;
  {
    acc::Accelerator accelerator;
    auto trained = acc::testing::sequential_lm();
    acc::load_checkpoint_in_model(trained, checkpoint);
    accelerator.prepare(trained);
    state_dir = accelerator.save_state(dir / "state");
  }
  acc::PartialState::destroy();
  auto model = empty_sequential();
  acc::load_checkpoint_and_dispatch(model, state_dir, acc::DeviceMap{{"", "disk"}});
  EXPECT_TRUE(torch::equal(run(model), expected));
}

TEST_F(Dispatch, ConvertedDiskWeightsNeedAnOffloadFolder) {
  auto model = empty_sequential();
  const auto error = message_of([&] {
    acc::load_checkpoint_and_dispatch(model, checkpoint, "disk",
                                      acc::DispatchOptions().dtype(torch::kBFloat16));
  });
  EXPECT_NE(error.find("offload_folder"), std::string::npos) << error;
  EXPECT_TRUE(all_meta(*model)) << "nothing loaded";

  acc::load_checkpoint_and_dispatch(
      model, checkpoint, "disk",
      acc::DispatchOptions().dtype(torch::kBFloat16).offload_folder(dir / "offload"));
  auto bf16_reference = acc::testing::sequential_lm();
  acc::load_checkpoint_in_model(bf16_reference, checkpoint);
  bf16_reference->to(torch::kBFloat16);
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(run(model), bf16_reference->forward(ids)));
}

TEST_F(Dispatch, ErrorsNameTheWeightOrModuleAndLoadNothing) {
  // A checkpoint without the head.
  acc::safetensors::NamedTensors headless;
  for (const auto& entry : acc::model_state(*reference)) {
    if (entry.first.rfind("head.", 0) != 0) headless.push_back(entry);
  }
  acc::safetensors::save_file(headless, dir / "headless.safetensors");
  auto model = empty_sequential();
  auto error = message_of([&] { acc::load_checkpoint_and_dispatch(model, dir / "headless.safetensors", "cpu"); });
  EXPECT_NE(error.find("'head.weight' of module 'head' is not in the checkpoint"), std::string::npos) << error;
  EXPECT_TRUE(all_meta(*model));

  error = message_of([&] {
    acc::load_checkpoint_and_dispatch(model, checkpoint, acc::DeviceMap{{"block9", "cpu"}, {"", "cpu"}});
  });
  EXPECT_NE(error.find("'block9'"), std::string::npos) << error;

  error = message_of([&] {
    acc::load_checkpoint_and_dispatch(model, checkpoint, acc::DeviceMap{{"embed", "cpu"}});
  });
  EXPECT_NE(error.find("puts the weight 'block0."), std::string::npos) << error;

  error = message_of([&] {
    acc::load_checkpoint_and_dispatch(model, checkpoint, "cpu", acc::DispatchOptions().dtype(torch::kInt));
  });
  EXPECT_NE(error.find("not a floating-point type"), std::string::npos) << error;

  auto wider = [] {
    acc::init_empty_weights empty;
    torch::nn::Sequential m = acc::testing::sequential_lm();
    m->push_back("extra", torch::nn::Linear(4, 4));
    return m;
  }();
  error = message_of([&] { acc::load_checkpoint_and_dispatch(wider, checkpoint, "cpu"); });
  EXPECT_NE(error.find("'extra.weight' of module 'extra'"), std::string::npos) << error;
  EXPECT_TRUE(all_meta(*model));
}

TEST_F(Dispatch, CpuWeightsAreCopiedInAroundTheForwardAsForAGpu) {
  acc::testing::ForcedOnCpu paths;
  paths.offload_copies = true;
  acc::testing::ForceOnCpuGuard copies(paths);
  auto model = empty_sequential();
  acc::load_checkpoint_and_dispatch(model, checkpoint, "cpu");
  auto block1 = model->named_children()["block1"];
  const auto weight = block1->named_parameters()["qkv.weight"];
  const void* at_rest = weight.data_ptr();
  const void* during = nullptr;
  acc::register_forward_pre_hook(*block1, [&](torch::nn::Module&) { during = weight.data_ptr(); });
  EXPECT_TRUE(torch::equal(run(model), expected));
  EXPECT_NE(during, at_rest) << "the forward ran on a copy";
  EXPECT_EQ(weight.data_ptr(), at_rest) << "and the CPU weights are back after it";
}

TEST_F(Dispatch, DispatchingAgainReplacesTheEarlierDispatch) {
  auto model = empty_sequential();
  acc::load_checkpoint_and_dispatch(model, checkpoint, "disk");
  EXPECT_TRUE(torch::equal(run(model), expected));
  acc::load_checkpoint_and_dispatch(model, checkpoint, "cpu");
  EXPECT_TRUE(none_meta(*model));
  EXPECT_TRUE(torch::equal(run(model), expected));
  EXPECT_TRUE(none_meta(*model)) << "the disk dispatch's hooks are gone";
  acc::dispatch_model(model, acc::DeviceMap{{"", "disk"}}, acc::DispatchOptions().offload_folder(dir / "again"));
  EXPECT_TRUE(torch::equal(run(model), expected));
}

TEST_F(Dispatch, RemoveHooksLeavesEveryWeightResident) {
  auto model = empty_sequential();
  acc::load_checkpoint_and_dispatch(model, checkpoint, "disk");
  acc::remove_hooks(model);
  EXPECT_TRUE(none_meta(*model));
  EXPECT_TRUE(torch::equal(run(model), expected));
  EXPECT_TRUE(none_meta(*model)) << "no hooks release them any more";
}

// The output layer uses the embedding's weight (one TensorImpl under two names).
struct TiedHeadImpl : torch::nn::Module {
  explicit TiedHeadImpl(const torch::Tensor& shared) { weight = register_parameter("weight", shared); }
  torch::Tensor forward(torch::Tensor x) { return torch::matmul(x, weight.t()); }
  torch::Tensor weight;
};
TORCH_MODULE(TiedHead);

torch::nn::Sequential tied_lm() {
  torch::nn::Sequential lm;
  torch::nn::Embedding embed(acc::testing::kVocab, acc::testing::kDim);
  lm->push_back("embed", embed);
  lm->push_back("block", acc::testing::TransformerBlock(acc::testing::kDim, acc::testing::kHeads,
                                                        acc::testing::kHidden));
  lm->push_back("head", TiedHead(embed->weight));
  return lm;
}

TEST_F(Dispatch, TiedWeightsOfTwoDiskEntriesAreBroughtInByBoth) {
  torch::manual_seed(2);
  auto tied_reference = tied_lm();
  acc::save_model(tied_reference, dir / "tied");
  torch::Tensor tied_expected;
  {
    torch::NoGradGuard no_grad;
    tied_expected = tied_reference->forward(ids);
  }
  auto model = [] {
    acc::init_empty_weights empty;
    return tied_lm();
  }();
  acc::load_checkpoint_and_dispatch(model, dir / "tied",
                                    acc::DeviceMap{{"embed", "disk"}, {"block", "cpu"}, {"head", "disk"}});
  EXPECT_TRUE(torch::equal(run(model), tied_expected)) << "the head runs after the embedding released the weight";
}

TEST_F(Dispatch, ModulesNoHookCanReachAreRefusedBeforeAnythingChanges) {
  // A GPU execution device (never touched: the check comes first) with the root's built-in
  // children (embedding, norm, head), which its forward calls directly, kept on disk.
  auto model = empty_tiny();
  const auto error = message_of([&] {
    acc::load_checkpoint_and_dispatch(model, checkpoint, acc::DeviceMap{{"", "disk"}},
                                      acc::DispatchOptions().execution_device(torch::Device("cuda:0")));
  });
  EXPECT_NE(error.find("'embed' (torch::nn::EmbeddingImpl) keeps its weights on disk and runs on cuda:0"),
            std::string::npos)
      << error;
  EXPECT_TRUE(all_meta(*model)) << "nothing loaded";
  for (const auto& module : model->modules()) {
    EXPECT_FALSE(acc::detail::has_module_hooks(*module)) << module->name() << " was hooked";
  }
}

TEST_F(Dispatch, ModelsSharingAnOffloadFolderKeepTheirOwnWeights) {
  torch::manual_seed(3);
  auto other = acc::testing::sequential_lm();
  acc::save_model(other, dir / "other", "40KB");  // same shard names as `checkpoint`, other values
  torch::Tensor other_expected;
  {
    torch::NoGradGuard no_grad;
    other_expected = other->forward(ids).to(torch::kBFloat16);
  }
  const auto options = acc::DispatchOptions().dtype(torch::kBFloat16).offload_folder(dir / "shared");
  auto first = empty_sequential();
  acc::load_checkpoint_and_dispatch(first, checkpoint, "disk", options);
  const auto first_output = run(first);
  auto second = empty_sequential();
  acc::load_checkpoint_and_dispatch(second, dir / "other", "disk", options);
  EXPECT_TRUE(torch::equal(run(first), first_output)) << "the second load replaced the first's files";
  EXPECT_FALSE(torch::equal(run(second), first_output));
}

TEST_F(Dispatch, ADestroyedModelsOffloadedWeightsAreFreed) {
  acc::testing::ForcedOnCpu paths;
  paths.offload_copies = true;
  acc::testing::ForceOnCpuGuard copies(paths);
  c10::weak_intrusive_ptr<c10::TensorImpl> weight{c10::intrusive_ptr<c10::TensorImpl>()};
  {
    auto model = empty_sequential();
    acc::load_checkpoint_and_dispatch(model, checkpoint, "cpu");
    weight = c10::weak_intrusive_ptr<c10::TensorImpl>(
        model->named_parameters()["block1.qkv.weight"].getIntrusivePtr());
    EXPECT_TRUE(torch::equal(run(model), expected));
  }
  auto next = empty_sequential();
  acc::load_checkpoint_and_dispatch(next, checkpoint, "cpu");  // dispatching sweeps dead models
  EXPECT_TRUE(weight.expired());
}

TEST_F(Dispatch, DispatchModelAndTheOffloadShortcutsOnALoadedModel) {
  auto error = message_of([&] { acc::dispatch_model(reference, acc::DeviceMap{{"", "disk"}}); });
  EXPECT_NE(error.find("offload_folder"), std::string::npos) << error;

  auto empty = empty_sequential();
  error = message_of([&] { acc::dispatch_model(empty, acc::DeviceMap{{"", "cpu"}}); });
  EXPECT_NE(error.find("load_checkpoint_and_dispatch"), std::string::npos) << error;

  auto loaded = acc::testing::sequential_lm();
  acc::load_checkpoint_in_model(loaded, checkpoint);
  acc::dispatch_model(loaded, acc::DeviceMap{{"embed", "cpu"}, {"block0", "disk"}, {"block1", "disk"},
                                             {"block2", "cpu"}, {"block3", "disk"}, {"norm", "cpu"},
                                             {"head", "disk"}},
                      acc::DispatchOptions().offload_folder(dir / "offload"));
  EXPECT_TRUE(all_meta(*loaded->named_children()["block0"]));
  EXPECT_TRUE(torch::equal(run(loaded), expected));

  auto on_disk = acc::testing::sequential_lm();
  acc::load_checkpoint_in_model(on_disk, checkpoint);
  acc::disk_offload(on_disk, dir / "offload2");
  EXPECT_TRUE(all_meta(*on_disk));
  EXPECT_TRUE(torch::equal(run(on_disk), expected));

  auto on_cpu = acc::testing::sequential_lm();
  acc::load_checkpoint_in_model(on_cpu, checkpoint);
  acc::cpu_offload(on_cpu, torch::kCPU);
  EXPECT_TRUE(torch::equal(run(on_cpu), expected));
}

}  // namespace

// save_state / load_state on one process: files, round trip of every kind of state, automatic
// naming and total_limit, completion markers, and error messages.
#include <acc/acc.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

#include "checkpoint/directory.h"
#include "env_fixture.h"
#include "test_util.h"

namespace fs = std::filesystem;
using acc::testing::ScratchDir;

namespace {

acc::AcceleratorOptions single_process(acc::ProjectConfiguration project = {}) {
  return acc::AcceleratorOptions().environment(acc::testing::fake_env({})).cpu(true).project_config(project);
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

struct Training {
  torch::nn::Sequential model{torch::nn::Linear(4, 8), torch::nn::Tanh(), torch::nn::Linear(8, 1)};
  acc::Optimizer<torch::optim::Adam> optimizer{model->parameters(), 0.1};
  torch::optim::StepLR scheduler{optimizer, 2, 0.5};

  void steps(int n) {
    for (int i = 0; i < n; ++i) {
      optimizer.zero_grad();
      model->forward(torch::randn({16, 4})).pow(2).mean().backward();
      optimizer.step();
      scheduler.step();
    }
  }
  std::vector<torch::Tensor> snapshot() const {
    std::vector<torch::Tensor> out;
    for (const auto& p : model->parameters()) out.push_back(p.detach().clone());
    for (const auto& p : model->parameters()) {
      const auto& state = static_cast<torch::optim::AdamParamState&>(
          *optimizer.state().at(p.unsafeGetTensorImpl()));
      out.push_back(state.exp_avg().clone());
      out.push_back(state.exp_avg_sq().clone());
    }
    return out;
  }
  double lr() const { return optimizer.param_groups()[0].options().get_lr(); }
};

bool all_equal(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!torch::equal(a[i], b[i])) return false;
  }
  return true;
}

struct Note {
  std::string text;
  void save(torch::serialize::OutputArchive& archive) const { archive.write("text", c10::IValue(text)); }
  void load(torch::serialize::InputArchive& archive) {
    c10::IValue value;
    archive.read("text", value);
    text = value.toStringRef();
  }
};

}  // namespace

TEST(SaveState, RestoresModelOptimizerSchedulerRngAndRegisteredObjects) {
  ScratchDir dir;
  acc::Accelerator accelerator(single_process());
  Training run;
  Note note{"epoch 3"};
  accelerator.prepare(run.model, run.optimizer, run.scheduler);
  accelerator.register_for_checkpointing(note);
  run.steps(5);
  const auto saved = run.snapshot();
  const double saved_lr = run.lr();
  accelerator.save_state(dir / "ckpt");
  const auto next_random = torch::rand({4});

  EXPECT_EQ(files_in(dir / "ckpt"),
            (std::vector<std::string>{"acc_checkpoint_complete", "checksums_0.txt", "custom_checkpoint_0.bin", "model.safetensors",
                                      "optimizer.libtorch.bin", "optimizer.safetensors", "random_states_0.bin",
                                      "scheduler.bin"}));
  run.steps(3);
  note.text = "changed";
  ASSERT_FALSE(all_equal(saved, run.snapshot()));
  ASSERT_NE(run.lr(), saved_lr);

  accelerator.load_state(dir / "ckpt");
  EXPECT_TRUE(all_equal(saved, run.snapshot()));
  EXPECT_EQ(run.lr(), saved_lr);
  EXPECT_EQ(note.text, "epoch 3");
  EXPECT_TRUE(torch::equal(torch::rand({4}), next_random)) << "the RNG continues where it was saved";
  // The scheduler's own step count was restored too (StepLR halves when the count before a step
  // is a multiple of 2): count 5 keeps the rate, count 6 halves it. The 8 reached before
  // loading would have halved at the first step.
  run.steps(1);
  EXPECT_EQ(run.lr(), saved_lr);
  run.steps(1);
  EXPECT_EQ(run.lr(), saved_lr * 0.5);
}

TEST(SaveState, AutomaticNamingKeepsTotalLimitAndLoadsTheNewestCompleteCheckpoint) {
  ScratchDir dir;
  const auto project = acc::ProjectConfiguration().project_dir(dir.path()).automatic_checkpoint_naming(true).total_limit(2);
  acc::Accelerator accelerator(single_process(project));
  Training run;
  accelerator.prepare(run.model, run.optimizer);
  std::vector<torch::Tensor> at_four;
  for (int i = 0; i < 5; ++i) {
    run.steps(1);
    EXPECT_EQ(accelerator.save_state(), dir / ("checkpoints/checkpoint_" + std::to_string(i)));
    if (i == 4) at_four = run.snapshot();
  }
  EXPECT_EQ(accelerator.save_iteration(), 5);
  EXPECT_EQ(files_in(dir / "checkpoints"), (std::vector<std::string>{"checkpoint_3", "checkpoint_4"}));
  // A newer directory without the completion marker (an interrupted copy) is never picked.
  fs::create_directories(dir / "checkpoints/checkpoint_9");
  run.steps(2);
  acc::Accelerator resumed_accelerator(single_process(project));
  Training resumed;
  resumed_accelerator.prepare(resumed.model, resumed.optimizer);
  EXPECT_EQ(resumed_accelerator.load_state(), dir / "checkpoints/checkpoint_4");
  EXPECT_TRUE(all_equal(resumed.snapshot(), at_four));
  EXPECT_EQ(resumed_accelerator.save_iteration(), 5);
  try {
    resumed_accelerator.load_state(dir / "checkpoints/checkpoint_9");
    FAIL() << "no error";
  } catch (const acc::CheckpointError& error) {
    EXPECT_NE(std::string(error.what()).find("has no acc_checkpoint_complete marker"), std::string::npos) << error.what();
  }
}

TEST(SaveState, ErrorsNameTheFix) {
  ScratchDir dir;
  acc::Accelerator accelerator(single_process());
  Training run;
  accelerator.prepare(run.model, run.optimizer);
  try {
    accelerator.save_state();
    FAIL() << "no error";
  } catch (const acc::ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("save_state() without a directory needs automatic checkpoint naming"),
              std::string::npos) << error.what();
  }
  EXPECT_THROW(accelerator.load_state(dir / "nothing"), acc::CheckpointError);
  // A checkpoint of a program with one more optimizer than this one has names the missing file.
  accelerator.save_state(dir / "one");
  Training second;
  accelerator.prepare(second.model, second.optimizer);
  try {
    accelerator.load_state(dir / "one");
    FAIL() << "no error";
  } catch (const acc::CheckpointError& error) {
    EXPECT_NE(std::string(error.what()).find("model_1.safetensors"), std::string::npos) << error.what();
  }
}

TEST(CheckpointDirectory, UncommittedWritesLeaveNothingAndCommitReplaces) {
  ScratchDir dir;
  {
    acc::detail::CheckpointDirectoryWriter writer(dir / "c", "0123456789abcdef", true);
    std::ofstream(writer.file("a.txt")) << "partial";
  }  // destroyed without commit: as if an exception unwound the save
  EXPECT_FALSE(fs::exists(dir / "c"));
  EXPECT_TRUE(files_in(dir.path()).empty());
  for (const char* text : {"first", "second"}) {
    acc::detail::CheckpointDirectoryWriter writer(dir / "c", text == std::string("first") ? "1111111111111111" : "2222222222222222", true);
    std::ofstream(writer.file("a.txt")) << text;
    writer.commit();
  }
  EXPECT_TRUE(acc::is_complete_checkpoint(dir / "c"));
  std::ifstream in(dir / "c/a.txt");
  std::string text;
  in >> text;
  EXPECT_EQ(text, "second");
  EXPECT_EQ(files_in(dir.path()), (std::vector<std::string>{"c"}));
}

TEST(SaveState, RestoresWhereTheAccumulationCycleStands) {
  ScratchDir dir;
  acc::Accelerator accelerator(single_process().gradient_accumulation_steps(4));
  Training run;
  accelerator.prepare(run.model, run.optimizer);
  auto syncs = [&](int batches) {
    std::vector<bool> out;
    for (int i = 0; i < batches; ++i) {
      auto guard = accelerator.accumulate(run.model);
      out.push_back(accelerator.sync_gradients());
    }
    return out;
  };
  syncs(2);
  accelerator.save_state(dir / "mid_cycle");
  const auto expected = syncs(3);  // batches 3, 4 (sync), 5
  EXPECT_EQ(expected, (std::vector<bool>{false, true, false}));
  accelerator.load_state(dir / "mid_cycle");
  EXPECT_EQ(syncs(3), expected);
}

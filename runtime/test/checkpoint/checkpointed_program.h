#pragma once
// A one-process program with everything save_state writes: model, optimizer (tensors and libtorch
// archive), scheduler, a registered object, a data loader's position and the RNG states. The tests
// of damaged and hostile checkpoints save it, break a file, and load it again.
#include <torch/torch.h>

#include <string>

#include <acc/acc.h>

#include "../data/indices_dataset.h"
#include "env_fixture.h"

namespace acc::testing {

inline acc::AcceleratorOptions checkpoint_options(acc::ProjectConfiguration project = {}) {
  return acc::AcceleratorOptions().environment(fake_env({})).cpu(true).project_config(project);
}

// An object registered for checkpointing (custom_checkpoint_0.bin).
struct Note {
  std::string text = "epoch 3";
  void save(torch::serialize::OutputArchive& archive) const { archive.write("text", c10::IValue(text)); }
  void load(torch::serialize::InputArchive& archive) {
    c10::IValue value;
    archive.read("text", value);
    text = value.toStringRef();
  }
};

struct CheckpointedProgram {
  explicit CheckpointedProgram(acc::ProjectConfiguration project = {}) : accelerator(checkpoint_options(project)) {
    accelerator.prepare(model, optimizer, scheduler);
    accelerator.register_for_checkpointing(note);
    loader = accelerator.prepare_data_loader(Indices(12), torch::data::DataLoaderOptions(4));
    optimizer.zero_grad();
    model->forward(torch::randn({4, 4})).sum().backward();
    optimizer.step();
  }
  acc::Accelerator accelerator;
  torch::nn::Linear model{4, 2};
  acc::Optimizer<torch::optim::Adam> optimizer{model->parameters(), 0.1};
  torch::optim::StepLR scheduler{optimizer, 2, 0.5};
  Note note;
  decltype(accelerator.prepare_data_loader(Indices(12), torch::data::DataLoaderOptions(4))) loader;
};

}  // namespace acc::testing

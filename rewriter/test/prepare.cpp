// RUN: %acc-migrate --rules=prepare %s 2>%t.err | FileCheck %s
// RUN: FileCheck --check-prefix=REPORT %s < %t.err
#include <torch/torch.h>

struct NetImpl : torch::nn::Module {};
TORCH_MODULE(Net);
struct Data : torch::data::datasets::Dataset<Data> {
  torch::data::Example<> get(size_t i) override { return {torch::ones({4}), torch::zeros({1})}; }
  torch::optional<size_t> size() const override { return 16; }
};

// A GAN: two models, two optimizers, a scheduler, one call.
void gan() {
  Net generator;
  auto discriminator = std::make_shared<NetImpl>();
  NetImpl *critic = new NetImpl;
  torch::optim::Adam g_opt(generator->parameters());
  auto d_opt = std::make_shared<torch::optim::Adam>(discriminator->parameters());
  torch::optim::StepLR scheduler(g_opt, 10);
  // CHECK: {{^}}+  accelerator.prepare(generator, discriminator, g_opt, *d_opt, scheduler);
  auto loader = torch::data::make_data_loader(Data{}, 8);
  for (auto &batch : *loader) {
    torch::Tensor loss;
    loss.backward();
  }
}

// Parameters collected first, then the optimizer.
void collected() {
  auto model = std::make_shared<NetImpl>();
  auto params = model->parameters();
  torch::optim::SGD sgd(params, torch::optim::SGDOptions(0.1).momentum(0.9));
  // CHECK: {{^}}+  accelerator.prepare(model, sgd);
}

// A plateau scheduler: libtorch's ReduceLROnPlateauScheduler has no LRScheduler base.
void plateau() {
  auto model = std::make_shared<NetImpl>();
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1));
  torch::optim::ReduceLROnPlateauScheduler on_plateau(sgd);
  // CHECK: {{^}}+  accelerator.prepare(model, sgd, on_plateau);
}

// The model comes from the caller: prepared there, reported here.
void from_caller(std::shared_ptr<NetImpl> model) {
  torch::optim::Adam opt(model->parameters());
  // REPORT: prepare.cpp:[[@LINE-2]]:43: prepare: model `model` is not created in `from_caller`
  // CHECK: {{^}}+  accelerator.prepare(opt);
}

// An optimizer member of a trainer: reported with the manual change.
struct Trainer {
  std::shared_ptr<NetImpl> net;
  torch::optim::Adam optimizer;
  // REPORT: prepare.cpp:[[@LINE-1]]:22: prepare: optimizer `Trainer::optimizer` is a class member; call `accelerator.prepare(<model member>, optimizer);`
};

// A model held as a member, the optimizer local to the method that trains: the member is prepared
// with the optimizer (in place: it keeps its type), so that two processes train data-parallel.
struct MemberTrainer {
  Net model;
  void train() {
    torch::optim::Adam opt(model->parameters());
    // CHECK: {{^}}+    accelerator.prepare(model, opt);
    torch::Tensor loss;
    loss.backward();
  }
};

// Model and optimizer members, built in init(): prepared there, after the optimizer is assigned.
struct InitTrainer {
  std::shared_ptr<NetImpl> net;
  std::shared_ptr<torch::optim::SGD> sgd;
  void init() {
    net = std::make_shared<NetImpl>();
    sgd = std::make_shared<torch::optim::SGD>(net->parameters(), torch::optim::SGDOptions(0.1));
    // CHECK: {{^}}+    accelerator.prepare(net, *sgd);
  }
};
// REPORT-NOT: InitTrainer::sgd

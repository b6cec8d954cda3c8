// The names the documentation's fragments use without declaring them (prelude `training`, the
// default): a small model and its config, a transformer-like block, a dataset, the loop's variables.
// Namespace-scope part (types), then, after the marker line, the block-scope part (objects): each
// fragment is compiled in a function after them, and may redeclare any of them (its own accelerator).
struct Config {
  int64_t width = 8;
};

struct NetImpl : torch::nn::Module {
  NetImpl() : NetImpl(Config{}) {}
  explicit NetImpl(const Config& config)
      : fc(register_module("fc", torch::nn::Linear(config.width, 10))) {}
  torch::Tensor forward(torch::Tensor x) { return torch::log_softmax(fc->forward(x), 1); }
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);

// A unit for the hooks' and FSDP's fragments.
struct BlockImpl : torch::nn::Module {
  BlockImpl() : fc(register_module("fc", torch::nn::Linear(8, 8))) {}
  torch::Tensor forward(torch::Tensor x) { return fc->forward(x); }
  torch::nn::Linear fc;
};
TORCH_MODULE(Block);

// A map-style dataset of (8 features, class) examples.
struct Samples : torch::data::datasets::Dataset<Samples> {
  torch::data::Example<> get(size_t i) override {
    return {torch::full({8}, static_cast<double>(i)), torch::tensor(static_cast<int64_t>(i % 10))};
  }
  torch::optional<size_t> size() const override { return 256; }
};

// An object with save/load members, for register_for_checkpointing.
struct Counter {
  int64_t value = 0;
  void save(torch::serialize::OutputArchive& archive) const { archive.write("value", torch::tensor(value)); }
  void load(torch::serialize::InputArchive& archive) {
    torch::Tensor t;
    archive.read("value", t);
    value = t.item<int64_t>();
  }
};

// doc-test: block scope
acc::Accelerator accelerator;
Config config;
Net model(config);
Net net(config);
Block block;
acc::Optimizer<torch::optim::AdamW> optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));
acc::Scheduler<torch::optim::StepLR> scheduler(optimizer, /*step_size=*/30, /*gamma=*/0.1);
auto dataset = Samples().map(torch::data::transforms::Stack<>());
torch::data::DataLoaderOptions options(64);
auto loader = accelerator.prepare_data_loader(Samples().map(torch::data::transforms::Stack<>()), 64);
auto eval_loader = accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(
    Samples().map(torch::data::transforms::Stack<>()), 64);
auto loss_fn = [](const torch::Tensor& output, const torch::Tensor& target) {
  return torch::nll_loss(output, target);
};
torch::Tensor x = torch::randn({4, 8});
torch::Tensor y = torch::zeros({4}, torch::kLong);
torch::Tensor loss = loss_fn(model->forward(x), y);
double lr = 1e-3;
int64_t step = 0, num_batches = 4;
int epoch = 0, epochs = 3;
bool resuming = false;
Counter my_object;
auto save_fn = [](torch::serialize::OutputArchive&) {};
auto load_fn = [](torch::serialize::InputArchive&) {};

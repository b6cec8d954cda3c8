// A small language model trained on one long token tensor sliced by hand: no DataLoader, the shape
// of most char-RNN and transformer-from-scratch programs. Usage: char_lm [batch size]
#include <torch/torch.h>

#include <iostream>
#include <string>

struct LanguageModelImpl : torch::nn::Module {
  LanguageModelImpl(int64_t vocab, int64_t hidden)
      : embed(register_module("embed", torch::nn::Embedding(vocab, hidden))),
        head(register_module("head", torch::nn::Linear(hidden, vocab))) {}
  torch::Tensor forward(torch::Tensor tokens) { return head->forward(torch::tanh(embed->forward(tokens))); }
  torch::nn::Embedding embed;
  torch::nn::Linear head;
};
TORCH_MODULE(LanguageModel);

int main(int argc, char **argv) {
  const int64_t vocab = 32, seq_len = 16, batch_size = argc > 1 ? std::stoll(argv[1]) : 8;
  torch::manual_seed(2);
  torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;
  torch::Tensor corpus = torch::randint(vocab, {4096}, torch::kLong);

  LanguageModel model(vocab, 64);
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), 3e-3);

  const int64_t chunk = seq_len * batch_size;
  for (int64_t step = 0; step + chunk + 1 < corpus.size(0); step += chunk) {
    auto input = corpus.slice(0, step, step + chunk).view({batch_size, seq_len}).to(device);
    auto target = corpus.slice(0, step + 1, step + chunk + 1).view({batch_size, seq_len}).to(device);
    optimizer.zero_grad();
    auto logits = model->forward(input);
    auto loss = torch::cross_entropy_loss(logits.view({batch_size * seq_len, vocab}), target.view({-1}));
    loss.backward();
    optimizer.step();
    if (step % (chunk * 8) == 0) std::cout << "step " << step << " loss " << loss.item<float>() << std::endl;
  }
}

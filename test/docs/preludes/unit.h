// Prelude `unit`: a module type whose forward the block itself defines out of line (hooks.md's guard
// line), with scope=namespace.
struct BlockImpl : torch::nn::Module {
  BlockImpl() : fc(register_module("fc", torch::nn::Linear(8, 8))) {}
  torch::Tensor forward(torch::Tensor x);
  torch::Tensor forward(torch::Tensor x, torch::Tensor mask);
  torch::nn::Linear fc;
};

// doc-test: block scope

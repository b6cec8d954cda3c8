// A small stand-in for <torch/torch.h>: the same namespaces, class names and overloads that
// acc-migrate's matchers look at, so that a test parses in milliseconds instead of seconds.
#pragma once
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace c10 {
enum class DeviceType : int8_t { CPU = 0, CUDA = 1 };
constexpr DeviceType kCPU = DeviceType::CPU;
constexpr DeviceType kCUDA = DeviceType::CUDA;
enum class ScalarType : int8_t { Float, Double, Long };
constexpr ScalarType kFloat = ScalarType::Float;
constexpr ScalarType kF32 = ScalarType::Float;
constexpr ScalarType kF64 = ScalarType::Double;
constexpr ScalarType kDouble = ScalarType::Double;
constexpr ScalarType kLong = ScalarType::Long;
struct Device {
  Device(DeviceType type, int8_t index = -1) : type_(type) {}
  Device(const std::string &name) : type_(DeviceType::CPU) {}
  DeviceType type() const { return type_; }
  DeviceType type_;
};
}  // namespace c10

namespace at {
using c10::Device;
using c10::DeviceType;
using c10::ScalarType;
struct TensorOptions {
  TensorOptions() = default;
  TensorOptions(Device) {}
  TensorOptions(DeviceType) {}
  TensorOptions(ScalarType) {}
  TensorOptions device(Device) const { return *this; }
  TensorOptions dtype(ScalarType) const { return *this; }
};
class TensorBase {
 public:
  Device device() const { return Device(DeviceType::CPU); }
  int64_t size(int64_t) const { return 0; }
};
class Tensor : public TensorBase {
 public:
  Tensor to(TensorOptions options = {}, bool non_blocking = false, bool copy = false) const { return *this; }
  Tensor to(Device device, ScalarType dtype, bool non_blocking = false, bool copy = false) const { return *this; }
  Tensor to(ScalarType dtype, bool non_blocking = false, bool copy = false) const { return *this; }
  Tensor to(const Tensor &other, bool non_blocking = false, bool copy = false) const { return *this; }
  Tensor cuda() const { return *this; }
  Tensor cpu() const { return *this; }
  void backward(const Tensor &gradient = {}, bool retain_graph = false, bool create_graph = false) const {}
  Tensor view(std::vector<int64_t> sizes) const { return *this; }
  Tensor reshape(std::vector<int64_t> sizes) const { return *this; }
  Tensor div(double) const { return *this; }
  Tensor sum() const { return *this; }
  Tensor eq(const Tensor &) const { return *this; }
  Tensor argmax(int64_t) const { return *this; }
  template <typename T> T item() const { return T(); }
  Tensor operator+(const Tensor &) const { return *this; }
  Tensor operator*(double) const { return *this; }
};
}  // namespace at

namespace torch {
using namespace at;
using c10::kCPU;
using c10::kCUDA;
using c10::kDouble;
using c10::kF32;
using c10::kF64;
using c10::kFloat;
using c10::kLong;
using Dtype = c10::ScalarType;
inline Tensor randn(std::vector<int64_t>, TensorOptions = {}) { return {}; }
inline Tensor zeros(std::vector<int64_t>, TensorOptions = {}) { return {}; }
inline Tensor tensor(float) { return {}; }
inline Tensor ones(std::vector<int64_t>, TensorOptions = {}) { return {}; }
inline Tensor nll_loss(const Tensor &, const Tensor &) { return {}; }
inline Tensor mse_loss(const Tensor &, const Tensor &) { return {}; }
namespace cuda { inline bool is_available() { return false; } }

namespace nn {
class Module {
 public:
  virtual ~Module() = default;
  virtual void to(Device device, ScalarType dtype, bool non_blocking = false) {}
  virtual void to(ScalarType dtype, bool non_blocking = false) {}
  virtual void to(Device device, bool non_blocking = false) {}
  std::vector<Tensor> parameters() const { return {}; }
  void zero_grad() {}
  void train(bool on = true) {}
  void eval() {}
};
template <typename Contained>
class ModuleHolder {
 public:
  ModuleHolder() : impl_(std::make_shared<Contained>()) {}
  Contained *operator->() { return impl_.get(); }
  std::shared_ptr<Contained> impl_;
};
struct LinearImpl : Module {
  LinearImpl(int64_t, int64_t) {}
  Tensor forward(const Tensor &x) { return x; }
};
struct Linear : ModuleHolder<LinearImpl> { using ModuleHolder::ModuleHolder; };
namespace utils {
inline double clip_grad_norm_(std::vector<Tensor> parameters, double max_norm) { return 0; }
inline void clip_grad_value_(std::vector<Tensor> parameters, double clip_value) {}
}  // namespace utils
}  // namespace nn
#define TORCH_MODULE(Name) \
  struct Name : ::torch::nn::ModuleHolder<Name##Impl> { using ::torch::nn::ModuleHolder<Name##Impl>::ModuleHolder; }

namespace optim {
struct OptimizerOptions {};
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void zero_grad() {}
  virtual Tensor step() { return {}; }
};
struct AdamOptions { AdamOptions(double lr = 1e-3) {} };
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options = {}) {}
};
struct SGDOptions { SGDOptions(double lr) {} SGDOptions &momentum(double) { return *this; } };
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options) {}
};
class LRScheduler {
 public:
  LRScheduler(Optimizer &optimizer) {}
  virtual ~LRScheduler() = default;
  void step() {}
};
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer &optimizer, unsigned step_size, double gamma = 0.1) : LRScheduler(optimizer) {}
};
}  // namespace optim

namespace data {
template <typename Data = Tensor, typename Target = Tensor>
struct Example { Data data; Target target; };
namespace datasets {
template <typename Self>
struct Dataset {
  std::optional<size_t> size() const { return 0; }
  template <typename T> Self map(T) { return static_cast<Self &>(*this); }
};
}  // namespace datasets
namespace samplers {
struct RandomSampler {};
struct SequentialSampler {};
}  // namespace samplers
namespace transforms {
template <typename T = Example<>> struct Stack {};
}  // namespace transforms
struct DataLoaderOptions {
  DataLoaderOptions(size_t batch_size = 1) {}
  DataLoaderOptions &workers(size_t) { return *this; }
};
template <typename Batch>
class DataLoaderBase {
 public:
  Batch *begin() { return nullptr; }
  Batch *end() { return nullptr; }
};
template <typename Dataset, typename Sampler>
class StatelessDataLoader : public DataLoaderBase<std::vector<Example<>>> {};
template <typename Sampler = samplers::RandomSampler, typename Dataset>
std::unique_ptr<StatelessDataLoader<Dataset, Sampler>> make_data_loader(Dataset dataset, DataLoaderOptions options = {}) {
  return nullptr;
}
template <typename Sampler = samplers::RandomSampler, typename Dataset>
std::unique_ptr<StatelessDataLoader<Dataset, Sampler>> make_data_loader(Dataset dataset, size_t batch_size) {
  return nullptr;
}
}  // namespace data

template <typename T> void save(const T &value, const std::string &path) {}
template <typename T> void load(T &value, const std::string &path) {}
}  // namespace torch

// Device maps (docs/big_model.md, "Device maps"): DeviceMap and its JSON, max memory, module sizes,
// tied parameters, and infer_auto_device_map's splitting, no-split classes, ties and clean_result.
// The numbers Accelerate would give are checked by parity.device_map (device_map_parity.py); the
// expectations here follow from the algorithm and the models' shapes.
#include <gtest/gtest.h>

#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <map>
#include <sstream>
#include <string>

#include <acc/device_map.h>
#include <acc/errors.h>
#include <acc/warnings.h>

#include "hooks/module_type.h"
#include "cpu_time.h"
#include "inference/module_tree.h"
#include "models.h"

namespace {

using acc::DeviceMap;

// Expects `call` to throw ConfigError whose message contains every one of `parts`.
template <typename F>
void expect_config_error(F call, std::initializer_list<std::string> parts) {
  try {
    call();
    ADD_FAILURE() << "no ConfigError";
  } catch (const acc::ConfigError& error) {
    const std::string message = error.what();
    for (const auto& part : parts) EXPECT_NE(message.find(part), std::string::npos) << message << " lacks " << part;
  }
}

uint64_t float_bytes(int64_t numel) { return static_cast<uint64_t>(numel) * 4; }

// ---------------------------------------------------------------------------------------------
// DeviceMap

TEST(DeviceMap, NormalisesDevices) {
  const DeviceMap map{{"embed", "0"},  {"layers.0", "cuda"}, {"layers.1", "cuda:1"},
                      {"norm", "cpu"}, {"head", "disk"},     {"unused", "meta"}};
  const std::vector<DeviceMap::Entry> expected{{"embed", "cuda:0"}, {"layers.0", "cuda:0"}, {"layers.1", "cuda:1"},
                                               {"norm", "cpu"},     {"head", "disk"},       {"unused", "meta"}};
  EXPECT_EQ(map.entries(), expected);
  EXPECT_EQ(map.devices(), (std::vector<std::string>{"cuda:0", "cuda:1", "cpu", "disk", "meta"}));
  EXPECT_FALSE(map.empty());
  EXPECT_TRUE(DeviceMap().empty());
}

TEST(DeviceMap, SetReplacesInPlace) {
  DeviceMap map{{"a", "cpu"}, {"b", "cpu"}};
  map.set("a", "1");
  map.set("c", "disk");
  EXPECT_EQ(map.entries(), (std::vector<DeviceMap::Entry>{{"a", "cuda:1"}, {"b", "cpu"}, {"c", "disk"}}));
}

TEST(DeviceMap, BadDevicesAndDuplicatesNameTheEntry) {
  expect_config_error([] { DeviceMap{{"layers.3", "gpu"}}; }, {"layers.3", "gpu"});
  expect_config_error([] { DeviceMap{{"a", "cuda:x"}}; }, {"'a'", "cuda:x"});
  expect_config_error([] { DeviceMap{{"a", "-1"}}; }, {"'a'", "-1"});
  expect_config_error([] { DeviceMap{{"a", "cpu:0"}}; }, {"'a'", "cpu:0"});
  expect_config_error([] { DeviceMap{{"a", "cpu"}, {"b", "disk"}, {"a", "disk"}}; }, {"'a'", "twice"});
  expect_config_error([] { DeviceMap{{"a..b", "cpu"}}; }, {"a..b"});
  DeviceMap map;
  expect_config_error([&] { map.set("lm_head", "tpu"); }, {"lm_head", "tpu"});
}

TEST(DeviceMap, DeviceOfFollowsDotSeparatedPrefixes) {
  const DeviceMap map{{"layers.1", "cuda:0"}, {"layers.10", "cpu"}, {"layers", "disk"}, {"layers.1.mlp", "cuda:1"}};
  EXPECT_EQ(map.device_of("layers.1"), "cuda:0");
  EXPECT_EQ(map.device_of("layers.1.attn.q.weight"), "cuda:0");
  EXPECT_EQ(map.device_of("layers.10.attn"), "cpu");  // "layers.1" does not cover "layers.10"
  EXPECT_EQ(map.device_of("layers.100"), "disk");
  EXPECT_EQ(map.device_of("layers.1.mlp.up.bias"), "cuda:1");  // the longest entry wins
  EXPECT_EQ(map.device_of("layers.1.mlpx"), "cuda:0");
  EXPECT_EQ(map.device_of("layers"), "disk");
  EXPECT_EQ(map.device_of("layersx"), std::nullopt);
  EXPECT_EQ(map.device_of("embed.weight"), std::nullopt);

  const DeviceMap whole{{"", "cpu"}, {"head", "disk"}};
  EXPECT_EQ(whole.device_of("embed.weight"), "cpu");
  EXPECT_EQ(whole.device_of(""), "cpu");
  EXPECT_EQ(whole.device_of("head.weight"), "disk");
}

TEST(DeviceMap, JsonRoundTripWithGpuIndicesAsIntegers) {
  const DeviceMap map{{"embed", "cuda:0"}, {"layers.0", "cuda:1"}, {"layers.1", "cpu"}, {"lm_head", "disk"}};
  const std::string json = map.to_json();
  EXPECT_EQ(json, R"({"embed":0,"layers.0":1,"layers.1":"cpu","lm_head":"disk"})");
  EXPECT_EQ(DeviceMap::from_json(json), map);
  EXPECT_EQ((DeviceMap{{"", "cpu"}}.to_json()), R"({"":"cpu"})");
  EXPECT_EQ(DeviceMap().to_json(), "{}");
  EXPECT_TRUE(DeviceMap::from_json("{}").empty());
}

TEST(DeviceMap, ReadsPythonHfDeviceMaps) {
  // json.dumps(model.hf_device_map): integers, and "cuda:N" where a torch.device was written.
  const auto map = DeviceMap::from_json(
      R"({"model.embed_tokens": 0, "model.layers.0": "cuda:1", "model.layers.1": "cpu", "lm_head": "disk", "": "cuda"})");
  const std::vector<DeviceMap::Entry> expected{{"model.embed_tokens", "cuda:0"},
                                               {"model.layers.0", "cuda:1"},
                                               {"model.layers.1", "cpu"},
                                               {"lm_head", "disk"},
                                               {"", "cuda:0"}};
  EXPECT_EQ(map.entries(), expected);  // in the file's order
}

TEST(DeviceMap, BadJsonNamesTheSourceAndTheEntry) {
  expect_config_error([] { DeviceMap::from_json(R"({"a": 0, "b": "cpu", "a": 1})", "offload/device_map.json"); },
                      {"offload/device_map.json", "'a'", "twice"});
  expect_config_error([] { DeviceMap::from_json(R"({"a": 0, "b": "tpu"})", "map.json"); }, {"map.json", "'b'", "tpu"});
  expect_config_error([] { DeviceMap::from_json(R"({"a": -1})", "map.json"); }, {"map.json", "'a'", "-1"});
  expect_config_error([] { DeviceMap::from_json(R"({"a": 0.5})", "map.json"); }, {"map.json", "'a'", "0.5"});
  expect_config_error([] { DeviceMap::from_json(R"({"a": true})", "map.json"); }, {"map.json", "'a'", "true"});
  expect_config_error([] { DeviceMap::from_json(R"(["a", 0])", "map.json"); }, {"map.json", "object"});
  expect_config_error([] { DeviceMap::from_json(R"({"a": )", "map.json"); }, {"map.json", "JSON"});
}

namespace {
std::string map_of(size_t entries) {
  std::string json = "{";
  for (size_t i = 0; i < entries; ++i) json += (i ? ",\"layers." : "\"layers.") + std::to_string(i) + "\":\"cpu\"";
  return json + "}";
}

double cpu_seconds_to_read(const std::string& json, size_t entries) {
  return acc::testing::least_cpu_seconds(3, [&] {
    EXPECT_EQ(DeviceMap::from_json(json, "map.json").entries().size(), entries);
  });
}
}  // namespace

// Sixteen times the entries take about sixteen times as long, not 256 (ordered_json looked each key
// up linearly). Both sizes are timed in this run, in CPU time (cpu_time.h); the bound is the
// geometric middle of the two outcomes.
TEST(DeviceMap, ReadingJsonTakesTimeLinearInTheEntries) {
  const size_t small = 1u << 13, large = 1u << 17;
  const double ratio = cpu_seconds_to_read(map_of(large), large) / cpu_seconds_to_read(map_of(small), small);
  EXPECT_LT(ratio, 64.0) << "16x the entries took " << ratio << "x as long";
}

TEST(DeviceMap, PrintsOneLinePerEntry) {
  std::ostringstream out;
  out << DeviceMap{{"", "cpu"}, {"lm_head", "1"}};
  EXPECT_EQ(out.str(), "\"\" -> cpu\nlm_head -> cuda:1\n");
}

// ---------------------------------------------------------------------------------------------
// Max memory

TEST(MaxMemory, ParsesSizesAndSortsDevices) {
  const auto memory = acc::parse_max_memory({{"disk", "1TB"}, {"cpu", "30GB"}, {"1", "10GiB"}, {"cuda:0", "1000"}});
  const acc::MaxMemory expected{{"cuda:0", 1000},
                                {"cuda:1", 10ULL << 30},
                                {"cpu", 30ULL * 1000 * 1000 * 1000},
                                {"disk", 1000ULL * 1000 * 1000 * 1000}};
  EXPECT_EQ(memory, expected);
  EXPECT_EQ(acc::parse_max_memory({{"cuda", "1.5MiB"}, {"cpu", "0"}, {"10", "0GB"}, {"2", "2KB"}}),
            (acc::MaxMemory{{"cuda:0", 3ULL << 19}, {"cuda:2", 2000}, {"cuda:10", 0}, {"cpu", 0}}));
}

TEST(MaxMemory, BadLimitsNameTheDevice) {
  expect_config_error([] { acc::parse_max_memory({{"cpu", "lots"}}); }, {"cpu", "lots"});
  expect_config_error([] { acc::parse_max_memory({{"0", "10XB"}}); }, {"cuda:0", "10XB"});
  expect_config_error([] { acc::parse_max_memory({{"gpu0", "1GB"}}); }, {"gpu0"});
  expect_config_error([] { acc::parse_max_memory({{"meta", "1GB"}}); }, {"meta"});
  expect_config_error([] { acc::parse_max_memory({{"0", "1GB"}, {"cuda:0", "2GB"}}); }, {"cuda:0", "twice"});
  expect_config_error([] { acc::get_max_memory({{"mps", 10}}); }, {"mps"});
}

TEST(MaxMemory, GivenLimitsAreNormalisedAndSorted) {
  EXPECT_EQ(acc::get_max_memory({{"cpu", 5}, {"cuda", 7}, {"disk", 9}}),
            (acc::MaxMemory{{"cuda:0", 7}, {"cpu", 5}, {"disk", 9}}));
}

TEST(MaxMemory, DetectedLimitsEndWithTheCpu) {
  const auto memory = acc::get_max_memory();
  ASSERT_FALSE(memory.empty());
  EXPECT_EQ(memory.back().first, "cpu");
  EXPECT_GT(memory.back().second, 0u);
  for (size_t i = 0; i + 1 < memory.size(); ++i) EXPECT_EQ(memory[i].first, "cuda:" + std::to_string(i));
}

// ---------------------------------------------------------------------------------------------
// Sizes and ties

acc::testing::ModelConfig small() {
  acc::testing::ModelConfig c;
  c.layers = 2;
  c.dim = 8;
  c.hidden = 16;
  c.vocab = 32;
  c.context = 4;
  return c;
}

std::map<std::string, uint64_t> as_map(const std::vector<std::pair<std::string, uint64_t>>& sizes) {
  return {sizes.begin(), sizes.end()};
}

TEST(ModuleSizes, CountsEachTensorOnceAndBuffersAtTheirOwnDtype) {
  const auto c = small();
  acc::testing::TinyLM model(c);
  const auto sizes = acc::compute_module_sizes(*model);
  const auto by_name = as_map(sizes);
  const uint64_t linear = float_bytes(c.dim * c.dim + c.dim);
  const uint64_t attention = 4 * linear + c.context * c.context / 8;  // a bool element is 1/8 byte
  const uint64_t mlp = float_bytes(c.dim * c.hidden + c.hidden) + float_bytes(c.hidden * c.dim + c.dim);
  const uint64_t norm = float_bytes(2 * c.dim);
  const uint64_t block = 2 * norm + attention + mlp;
  const uint64_t embed = float_bytes(c.vocab * c.dim);
  EXPECT_EQ(by_name.at("embed"), embed);
  EXPECT_EQ(by_name.at("layers.1.attn"), attention);
  EXPECT_EQ(by_name.at("layers.0"), block);
  EXPECT_EQ(by_name.at("lm_head"), float_bytes(c.vocab));  // its weight is counted under embed
  EXPECT_EQ(by_name.count("lm_head.weight"), 0u);
  EXPECT_EQ(by_name.at("position_ids"), 8u * c.context);
  EXPECT_EQ(by_name.at(""), embed + 2 * block + norm + float_bytes(c.vocab) + 8 * c.context);
  EXPECT_EQ(sizes.front().first, "");
  EXPECT_EQ(sizes[1].first, "embed");

  // bf16: floating-point tensors at 2 bytes, the int64 and bool buffers as they are.
  const auto half = as_map(acc::compute_module_sizes(*model, c10::ScalarType::BFloat16));
  EXPECT_EQ(half.at("embed"), embed / 2);
  EXPECT_EQ(half.at("position_ids"), 8u * c.context);
  EXPECT_EQ(half.at("layers.0.attn.mask"), c.context * c.context / 8u);
  // A dtype larger than the weights does not grow them.
  EXPECT_EQ(as_map(acc::compute_module_sizes(*model, c10::ScalarType::Double)).at(""), by_name.at(""));
}

TEST(ModuleSizes, BoolElementsRoundUpToWholeBytes) {
  auto c = small();
  c.context = 3;  // a 3x3 bool mask: 9 bits
  acc::testing::Attention attention(c.dim, c.context);
  EXPECT_EQ(as_map(acc::compute_module_sizes(*attention)).at("mask"), 2u);
}

// A module whose weights are meta tensors (acc::init_empty_weights): shapes only, nothing allocated.
struct HugeImpl : torch::nn::Module {
  HugeImpl() {
    register_parameter("weight", torch::empty({100000, 100000}, torch::TensorOptions().device(torch::kMeta)));
    register_buffer("scale", torch::empty({100000}, torch::TensorOptions().device(torch::kMeta).dtype(torch::kHalf)));
  }
};
TORCH_MODULE(Huge);

TEST(ModuleSizes, MetaTensorsAreSizedFromTheirShapes) {
  Huge huge;
  EXPECT_EQ(as_map(acc::compute_module_sizes(*huge)).at(""), 4ULL * 100000 * 100000 + 2 * 100000);
  // The weight does not fit on the CPU: it goes to disk, and the buffer after it too.
  auto options = acc::AutoDeviceMapOptions().max_memory({{"cpu", 1ULL << 30}}).clean_result(false);
  EXPECT_EQ(acc::infer_auto_device_map(*huge, options).entries(),
            (std::vector<DeviceMap::Entry>{{"weight", "disk"}, {"scale", "disk"}}));
  EXPECT_EQ(acc::infer_auto_device_map(*huge, options.max_memory({{"cpu", 1ULL << 40}})).entries(),
            (std::vector<DeviceMap::Entry>{{"weight", "cpu"}, {"scale", "cpu"}}));
}

TEST(TiedParameters, SameTensorUnderTwoNames) {
  acc::testing::TinyLM model(small());
  EXPECT_EQ(acc::find_tied_parameters(*model),
            (std::vector<std::vector<std::string>>{{"embed.weight", "lm_head.weight"}}));
  // libtorch's named_parameters() lists a tied tensor under both names (Python's lists it once).
  const auto named = model->named_parameters();
  EXPECT_TRUE(named.contains("embed.weight") && named.contains("lm_head.weight"));
  torch::nn::Sequential plain(torch::nn::Linear(2, 2));
  EXPECT_TRUE(acc::find_tied_parameters(*plain).empty());
}

TEST(TiedParameters, SharedModulesTieAllTheirParameters) {
  acc::testing::Nested model(small());
  const auto groups = acc::find_tied_parameters(*model);
  const std::vector<std::vector<std::string>> expected{{"encoder.blocks.0.attn.q.weight", "head.weight"},
                                                       {"decoder.proj.weight", "encoder.proj.weight"},
                                                       {"decoder.proj.bias", "encoder.proj.bias"}};
  EXPECT_EQ(groups, expected);
}

// ---------------------------------------------------------------------------------------------
// infer_auto_device_map

// block (two Linear(10, 10), 440 bytes each) then head (Linear(10, 10)).
struct PairImpl : torch::nn::Module {
  PairImpl() {
    first = register_module("first", torch::nn::Linear(10, 10));
    second = register_module("second", torch::nn::Linear(10, 10));
  }
  torch::nn::Linear first{nullptr}, second{nullptr};
};
TORCH_MODULE(Pair);

struct TwoPartImpl : torch::nn::Module {
  TwoPartImpl() {
    block = register_module("block", Pair());
    head = register_module("head", torch::nn::Linear(10, 10));
  }
  Pair block{nullptr};
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(TwoPart);

constexpr uint64_t kLinear = 440;

TEST(InferAutoDeviceMap, SplitsAModuleThatDoesNotFit) {
  TwoPart model;
  // GPU 0 keeps room for the largest layer (440): 600 left, less than the block (880).
  auto options = acc::AutoDeviceMapOptions().max_memory({{"cuda:0", kLinear + 600}, {"cpu", 1 << 20}});
  const auto map = acc::infer_auto_device_map(*model, options);
  EXPECT_EQ(map.entries(),
            (std::vector<DeviceMap::Entry>{{"block.first", "cuda:0"}, {"block.second", "cpu"}, {"head", "cpu"}}));
  EXPECT_EQ(map.device_of("block.second.weight"), "cpu");
}

TEST(InferAutoDeviceMap, NoSplitClassesMoveWhole) {
  TwoPart model;
  for (const std::string name : {"Pair", "PairImpl"}) {
    auto options = acc::AutoDeviceMapOptions()
                       .max_memory({{"cuda:0", kLinear + 600}, {"cpu", 1 << 20}})
                       .no_split_module_classes({name});
    // The block cannot be split: it goes to the CPU, and so does everything after it.
    EXPECT_EQ(acc::infer_auto_device_map(*model, options).entries(), (std::vector<DeviceMap::Entry>{{"", "cpu"}}))
        << name;
  }
  EXPECT_TRUE(acc::detail::module_type_matches(model->block->name(), "Pair"));
}

TEST(InferAutoDeviceMap, ReservesTheLargestLayerOnGpuZeroOnly) {
  TwoPart model;
  // GPU 0 cannot hold a layer beside the reserve; GPU 1 has no reserve and takes two layers.
  auto options =
      acc::AutoDeviceMapOptions().max_memory({{"cuda:0", kLinear + 100}, {"cuda:1", 2 * kLinear}, {"cpu", 1 << 20}});
  EXPECT_EQ(acc::infer_auto_device_map(*model, options).entries(),
            (std::vector<DeviceMap::Entry>{{"block", "cuda:1"}, {"head", "cpu"}}));
}

TEST(InferAutoDeviceMap, EverythingFitsIsOneEntry) {
  acc::testing::TinyLM model(small());
  auto options = acc::AutoDeviceMapOptions().max_memory({{"cuda:0", 1 << 30}, {"cpu", 1 << 30}});
  EXPECT_EQ(acc::infer_auto_device_map(*model, options).entries(), (std::vector<DeviceMap::Entry>{{"", "cuda:0"}}));
}

TEST(InferAutoDeviceMap, CpuThenDisk) {
  acc::testing::TinyLM model(small());
  const auto sizes = as_map(acc::compute_module_sizes(*model));
  const uint64_t block = sizes.at("layers.0");
  // The CPU holds the embedding with its tied head, a block and the reserve for a block.
  auto options = acc::AutoDeviceMapOptions()
                     .max_memory({{"cpu", sizes.at("embed") + sizes.at("lm_head") + 2 * block}})
                     .no_split_module_classes({"Block"});
  const auto map = acc::infer_auto_device_map(*model, options);
  const std::vector<DeviceMap::Entry> expected{{"embed", "cpu"},     {"lm_head", "cpu"}, {"layers.0", "cpu"},
                                               {"layers.1", "disk"}, {"norm", "disk"},   {"position_ids", "disk"}};
  EXPECT_EQ(map.entries(), expected);
}

TEST(InferAutoDeviceMap, TiedModulesStayTogether) {
  acc::testing::TinyLM model(small());
  const auto sizes = as_map(acc::compute_module_sizes(*model));
  // Room on GPU 0 for the embedding but not with the head tied to it: both go to GPU 1.
  const uint64_t reserve = sizes.at("layers.0.mlp.up");  // the largest layer when blocks split
  auto options = acc::AutoDeviceMapOptions().max_memory(
      {{"cuda:0", reserve + sizes.at("embed") + sizes.at("lm_head") - 1}, {"cuda:1", 1 << 30}, {"cpu", 1 << 30}});
  const auto map = acc::infer_auto_device_map(*model, options.clean_result(false));
  ASSERT_GE(map.entries().size(), 2u);
  EXPECT_EQ(map.entries()[0], (DeviceMap::Entry{"embed", "cuda:1"}));
  EXPECT_EQ(map.entries()[1], (DeviceMap::Entry{"lm_head", "cuda:1"}));  // entered with the embedding
  EXPECT_EQ(map.device_of("lm_head.weight"), map.device_of("embed.weight"));
}

TEST(InferAutoDeviceMap, CleanResultMergesModulesOnOneDevice) {
  TwoPart model;
  auto options = acc::AutoDeviceMapOptions().max_memory({{"cuda:0", kLinear + 600}, {"cuda:1", 1 << 20}});
  EXPECT_EQ(acc::infer_auto_device_map(*model, options).entries(),
            (std::vector<DeviceMap::Entry>{{"block.first", "cuda:0"}, {"block.second", "cuda:1"}, {"head", "cuda:1"}}));
  auto big = acc::AutoDeviceMapOptions().max_memory({{"cuda:0", 1 << 20}});
  EXPECT_EQ(acc::infer_auto_device_map(*model, big).entries(), (std::vector<DeviceMap::Entry>{{"", "cuda:0"}}));
  EXPECT_EQ(acc::infer_auto_device_map(*model, big.clean_result(false)).entries(),
            (std::vector<DeviceMap::Entry>{{"block", "cuda:0"}, {"head", "cuda:0"}}));
}

struct HolderImpl : torch::nn::Module {
  HolderImpl() { attn = register_module("attn", acc::testing::Attention(8, 64)); }
  acc::testing::Attention attn{nullptr};
};
TORCH_MODULE(Holder);

TEST(InferAutoDeviceMap, OffloadedBuffersWarnWhenNoGpuHoldsThem) {
  std::vector<std::string> warnings;
  // Only this warning: the other, once per process, says that GPU 0 is not on this machine.
  auto previous = acc::set_warning_handler([&](const std::string& message) {
    if (message.find("offload_buffers") != std::string::npos) warnings.push_back(message);
  });
  // An attention with a 64x64 bool mask (512 bytes of buffers), kept whole, goes to the CPU; its
  // buffers would stay on the execution device, and GPU 0 has 10 bytes.
  Holder model;
  const auto sizes = as_map(acc::compute_module_sizes(*model));
  auto options =
      acc::AutoDeviceMapOptions().max_memory({{"cuda:0", 10}, {"cpu", 1 << 20}}).no_split_module_classes({"Attention"});
  const auto kept = acc::infer_auto_device_map(*model, options);
  EXPECT_EQ(kept.entries(), (std::vector<DeviceMap::Entry>{{"attn", "cpu"}}));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("offload_buffers"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find(" " + std::to_string(sizes.at("attn.mask")) + " bytes"), std::string::npos) << warnings[0];
  // offload_buffers: the same map, no warning.
  EXPECT_EQ(acc::infer_auto_device_map(*model, options.offload_buffers(true)), kept);
  EXPECT_EQ(warnings.size(), 1u);
  acc::set_warning_handler(previous);
}

TEST(InferAutoDeviceMap, DtypeSizesTheWeightsAsLoaded) {
  TwoPart model;
  // The block (880 bytes in float32, 440 in bf16) and the head (440, 220) on a CPU of 660 bytes
  // that keeps room for the largest layer left: in bf16 both fit; in float32 the block goes to disk,
  // and so does everything after it.
  auto options = acc::AutoDeviceMapOptions().max_memory({{"cpu", 3 * kLinear / 2}}).no_split_module_classes({"Pair"});
  EXPECT_EQ(acc::infer_auto_device_map(*model, options.dtype(c10::ScalarType::BFloat16)).entries(),
            (std::vector<DeviceMap::Entry>{{"", "cpu"}}));
  EXPECT_EQ(acc::infer_auto_device_map(*model, options.dtype(std::nullopt)).entries(),
            (std::vector<DeviceMap::Entry>{{"", "disk"}}));
}

// ---------------------------------------------------------------------------------------------
// Balanced memory and resolve_device_map

TEST(BalancedMemory, SpreadsAModelOverTheGpus) {
  acc::testing::TinyLM model(small());
  const auto options = acc::AutoDeviceMapOptions()
                           .max_memory({{"cuda:0", 1 << 30}, {"cuda:1", 1 << 30}, {"cpu", 1 << 30}})
                           .no_split_module_classes({"Block"});
  const auto balanced = acc::get_balanced_memory(*model, options);
  ASSERT_EQ(balanced.size(), 3u);
  EXPECT_LT(balanced[0].second, uint64_t{1} << 30);  // GPU 0 gets about half the model
  EXPECT_EQ(balanced[1].second, uint64_t{1} << 30);  // the last GPU keeps its limit
  EXPECT_EQ(balanced[2].second, uint64_t{1} << 30);
  const auto low_zero = acc::get_balanced_memory(*model, options, /*low_zero=*/true);
  EXPECT_LT(low_zero[0].second, balanced[0].second);

  EXPECT_EQ(acc::resolve_device_map(*model, "sequential", options).entries(),
            (std::vector<DeviceMap::Entry>{{"", "cuda:0"}}));
  EXPECT_EQ(acc::resolve_device_map(*model, "balanced", options).devices(),
            (std::vector<std::string>{"cuda:0", "cuda:1"}));
  EXPECT_EQ(acc::resolve_device_map(*model, "auto", options), acc::resolve_device_map(*model, "balanced", options));

  // Without GPUs, the limits come back unchanged.
  const auto cpu_only = acc::AutoDeviceMapOptions().max_memory({{"cpu", 12345}, {"disk", 99}});
  EXPECT_EQ(acc::get_balanced_memory(*model, cpu_only), cpu_only.max_memory());
}

TEST(ResolveDeviceMap, SingleDevicesAndJson) {
  torch::nn::Linear model(2, 2);
  EXPECT_EQ(acc::resolve_device_map(*model, "cpu").entries(), (std::vector<DeviceMap::Entry>{{"", "cpu"}}));
  EXPECT_EQ(acc::resolve_device_map(*model, "cuda:1").entries(), (std::vector<DeviceMap::Entry>{{"", "cuda:1"}}));
  EXPECT_EQ(acc::resolve_device_map(*model, "disk").entries(), (std::vector<DeviceMap::Entry>{{"", "disk"}}));
  EXPECT_EQ(acc::resolve_device_map(*model, R"({"weight": 0, "bias": "cpu"})"),
            (DeviceMap{{"weight", "cuda:0"}, {"bias", "cpu"}}));
  expect_config_error([&] { acc::resolve_device_map(*model, "balanced_low_1"); }, {"balanced_low_1", "auto"});
}

// ---------------------------------------------------------------------------------------------
// The torch-free core

TEST(CleanDeviceMap, MergesWhereAllChildrenShareADevice) {
  using acc::detail::DeviceEntries;
  auto clean = [](DeviceEntries entries) {
    acc::detail::clean_device_map(entries);
    return entries;
  };
  EXPECT_EQ(clean({{"a.x", "cuda:0"}, {"a.y", "cuda:0"}, {"b", "cpu"}}),
            (DeviceEntries{{"a", "cuda:0"}, {"b", "cpu"}}));
  EXPECT_EQ(clean({{"a.x", "cpu"}, {"b", "cpu"}}), (DeviceEntries{{"", "cpu"}}));
  EXPECT_EQ(clean({{"a.b.x", "cuda:0"}, {"a.b.y", "cuda:0"}, {"a.c", "cuda:1"}}),
            (DeviceEntries{{"a.b", "cuda:0"}, {"a.c", "cuda:1"}}));
  EXPECT_EQ(clean({{"a.x", "cuda:0"}, {"b", "cpu"}}), (DeviceEntries{{"a.x", "cuda:0"}, {"b", "cpu"}}));  // one entry
  // The merged entry takes the place of its first child.
  EXPECT_EQ(clean({{"b", "cuda:1"}, {"a.x", "cuda:0"}, {"c", "cuda:1"}, {"a.y", "cuda:0"}}),
            (DeviceEntries{{"b", "cuda:1"}, {"a", "cuda:0"}, {"c", "cuda:1"}}));
  // "layers.1" and "layers.10" are different modules.
  EXPECT_EQ(clean({{"layers.1.x", "cpu"}, {"layers.1.y", "cpu"}, {"layers.10", "disk"}}),
            (DeviceEntries{{"layers.1", "cpu"}, {"layers.10", "disk"}}));
}

// A hand-built tree: root { a: A { w }, b: B { w } } with a.w and b.w one tensor.
acc::detail::ModuleTree tied_tree(uint64_t numel) {
  acc::detail::ModuleTree tree;
  tree.modules.resize(3);
  tree.modules[0].type = "Root";
  tree.modules[0].children = {{"a", 1}, {"b", 2}};
  tree.modules[1].type = "A";
  tree.modules[1].parameters = {{"w", numel, 32, true, 7}};
  tree.modules[2].type = "B";
  tree.modules[2].parameters = {{"w", numel, 32, true, 7}, {"own", 1, 32, true, 8}};
  return tree;
}

TEST(ModuleTree, TiedTensorsCountOnceUnderTheirFirstName) {
  const auto tree = tied_tree(10);
  const auto sizes = acc::detail::tree_module_sizes(tree, std::nullopt);
  EXPECT_EQ(sizes.at(""), 11u * 32);
  EXPECT_EQ(sizes.at("a"), 10u * 32);
  EXPECT_EQ(sizes.at("b"), 32u);
  EXPECT_FALSE(sizes.contains("b.w"));
  EXPECT_EQ(acc::detail::tree_tied_parameters(tree), (std::vector<std::vector<std::string>>{{"a.w", "b.w"}}));

  acc::detail::PlacementOptions options;
  options.max_memory = {{"cuda:0", 1000}, {"cpu", 1000}};
  options.clean_result = false;
  // "a" brings "b" along.
  EXPECT_EQ(acc::detail::tree_infer_device_map(tree, options),
            (acc::detail::DeviceEntries{{"a", "cuda:0"}, {"b", "cuda:0"}}));
}

}  // namespace

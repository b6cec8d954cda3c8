// safetensors reader/writer: every dtype, both directions against Python safetensors in the same
// run, zero-copy mapping, and a clear error for each kind of malformed file.
#include <acc/safetensors.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>

#include "cpu_time.h"
#include "test_util.h"

namespace st = acc::safetensors;
using acc::testing::bytes_hex;
using acc::testing::run_python;
using acc::testing::ScratchDir;

namespace {

// A tensor of every dtype Python safetensors knows, plus 0-d, empty and non-contiguous ones.
st::NamedTensors every_dtype() {
  const std::vector<std::pair<std::string, at::ScalarType>> types = {
      {"bool", at::kBool},       {"u8", at::kByte},        {"i8", at::kChar},
      {"u16", at::kUInt16},      {"i16", at::kShort},      {"u32", at::kUInt32},
      {"i32", at::kInt},         {"u64", at::kUInt64},     {"i64", at::kLong},
      {"f16", at::kHalf},        {"bf16", at::kBFloat16},  {"f32", at::kFloat},
      {"f64", at::kDouble},      {"f8_e4m3", at::kFloat8_e4m3fn},
      {"f8_e5m2", at::kFloat8_e5m2}, {"c64", at::kComplexFloat}};
  st::NamedTensors out;
  for (const auto& [name, type] : types) {
    auto values = at::arange(-5, 7, at::kLong).reshape({3, 4});
    if (type == at::kBool) values = values.remainder(2);
    if (type == at::kByte || type == at::kUInt16 || type == at::kUInt32 || type == at::kUInt64) {
      values = values.abs();
    }
    out.emplace_back(name, values.to(at::kDouble).div(type == at::kDouble ? 3.0 : 1.0).to(type));
  }
  out.emplace_back("scalar", at::scalar_tensor(2.5, at::kFloat));
  out.emplace_back("empty", at::zeros({0, 3}, at::kFloat));
  out.emplace_back("transposed", at::arange(6, at::kFloat).reshape({2, 3}).t());
  return out;
}

void expect_same(const at::Tensor& a, const at::Tensor& b, const std::string& name) {
  EXPECT_EQ(a.scalar_type(), b.scalar_type()) << name;
  EXPECT_EQ(a.sizes(), b.sizes()) << name;
  EXPECT_EQ(bytes_hex(a), bytes_hex(b)) << name;
}

const char* kPythonDump = R"(
import json, sys, torch
from safetensors.torch import load_file, save_file, _TYPES
names = {v: k for k, v in _TYPES.items()}
def dump(tensors):
    return {k: {"dtype": names[t.dtype], "shape": list(t.shape),
                "hex": t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes().hex()}
            for k, t in tensors.items()}
)";

}  // namespace

TEST(Safetensors, RoundTripsEveryDtype) {
  ScratchDir dir;
  const auto tensors = every_dtype();
  st::save_file(tensors, dir / "all.safetensors");
  st::MappedFile file(dir / "all.safetensors");
  EXPECT_EQ(file.metadata(), (st::Metadata{{"format", "pt"}}));
  ASSERT_EQ(file.names().size(), tensors.size());
  for (const auto& [name, tensor] : tensors) expect_same(file.tensor(name), tensor, name);
}

TEST(Safetensors, PythonReadsWhatAccWrites) {
  ScratchDir dir;
  const auto tensors = every_dtype();
  st::save_file(tensors, dir / "acc.safetensors", {{"format", "pt"}, {"note", "from acc"}});
  nlohmann::json expected;
  for (const auto& [name, tensor] : tensors) {
    expected[name] = {{"dtype", st::dtype_name(st::from_torch(tensor.scalar_type(), name))},
                      {"shape", tensor.sizes().vec()},
                      {"hex", bytes_hex(tensor)}};
  }
  std::ofstream(dir / "expected.json") << expected.dump();
  const auto result = run_python(std::string(kPythonDump) + R"(
from safetensors import safe_open
path, expected = sys.argv[1], json.load(open(sys.argv[2]))
got = dump(load_file(path))
with safe_open(path, "pt") as f:
    assert f.metadata() == {"format": "pt", "note": "from acc"}, f.metadata()
bad = [k for k in expected if got.get(k) != expected[k]] + [k for k in got if k not in expected]
print("MISMATCH", bad) if bad else print("OK", len(got))
)", dir / "acc.safetensors " + dir / "expected.json");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output, "OK " + std::to_string(tensors.size()) + "\n");
}

TEST(Safetensors, AccReadsWhatPythonWrites) {
  ScratchDir dir;
  const auto result = run_python(std::string(kPythonDump) + R"(
t = {"f32": torch.randn(3, 5), "f16": torch.randn(7).half(), "bf16": torch.randn(2, 2).bfloat16(),
     "f64": torch.randn(4).double(), "i64": torch.arange(-4, 4), "i32": torch.arange(9).int(),
     "i16": torch.arange(5).short(), "i8": torch.arange(-3, 3).to(torch.int8),
     "u8": torch.arange(200, 210).to(torch.uint8), "bool": torch.tensor([True, False, True]),
     "u16": torch.arange(3).to(torch.uint16), "u32": torch.arange(3).to(torch.uint32),
     "u64": torch.arange(3).to(torch.uint64), "f8": torch.randn(4).to(torch.float8_e4m3fn),
     "c64": torch.randn(3, dtype=torch.complex64), "scalar": torch.tensor(1.5), "empty": torch.zeros(0, 2)}
save_file(t, sys.argv[1], metadata={"format": "pt", "origin": "python"})
json.dump(dump(t), open(sys.argv[2], "w"))
)", dir / "py.safetensors " + dir / "py.json");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto expected = nlohmann::json::parse(std::ifstream(dir / "py.json"));
  st::MappedFile file(dir / "py.safetensors");
  EXPECT_EQ(file.metadata(), (st::Metadata{{"format", "pt"}, {"origin", "python"}}));
  ASSERT_EQ(file.names().size(), expected.size());
  for (const auto& [name, info] : expected.items()) {
    const auto tensor = file.tensor(name);
    EXPECT_STREQ(st::dtype_name(st::from_torch(tensor.scalar_type(), name)),
                 info["dtype"].get<std::string>().c_str()) << name;
    EXPECT_EQ(tensor.sizes().vec(), info["shape"].get<std::vector<int64_t>>()) << name;
    EXPECT_EQ(bytes_hex(tensor), info["hex"].get<std::string>()) << name;
  }
}

TEST(Safetensors, MapsWithoutCopyingAndWritesNeverReachTheFile) {
  ScratchDir dir;
  st::save_file({{"w", at::arange(1024, at::kFloat)}}, dir / "w.safetensors");
  at::Tensor first, second;
  uint64_t data_start = 0;
  {
    st::MappedFile file(dir / "w.safetensors");
    first = file.tensor("w");
    second = file.tensor("w");
    data_start = file.header().data_start;
  }  // the tensors keep the mapping alive
  EXPECT_EQ(first.data_ptr(), second.data_ptr());  // both view the one mapping, no copies
  // The map starts on a page boundary, so a tensor inside it sits at data_start within its page.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first.data_ptr()) % 4096, data_start % 4096);
  first.fill_(7);
  EXPECT_EQ(st::MappedFile(dir / "w.safetensors").tensor("w")[5].item<float>(), 5.0f);
}

namespace {
std::string header_file(const std::string& json, const std::string& data = "") {
  std::string out(8, '\0');
  const uint64_t length = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  return out + json + data;
}

std::string load_error(const std::string& bytes) {
  try {
    st::parse_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "bad.safetensors");
  } catch (const st::FormatError& error) {
    return error.what();
  }
  return "no error";
}
}  // namespace

TEST(Safetensors, RejectsMalformedFilesNamingFileAndProblem) {
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_EQ(load_error(header_file(ok, std::string(8, 'x'))), "no error");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"abc", "shorter than the 8-byte header length"},
      {std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8), "its first 8 bytes, read as the header length, exceed the limit of 100000000 bytes"},
      {header_file(ok).substr(0, 20), "read as the header length, run past the end of the file (20 bytes"},
      {header_file("{\"a\":", ""), "is not valid JSON"},
      {header_file("[1,2]"), "the header is not a JSON object"},
      {header_file(R"({"a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", std::string(8, 'x')),
       "unknown dtype 'F33'"},
      {header_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, 'x')),
       "spans 8 bytes but its shape and dtype need 12"},
      {header_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", std::string(8, 'x')),
       "not a non-negative integer"},
      {header_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}})"),
       "element count overflows"},
      {header_file(ok, std::string(4, 'x')), "truncated or trailing data"},
      {header_file(ok, std::string(12, 'x')), "truncated or trailing data"},
      {header_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                   std::string(12, 'x')),
       "must be contiguous and must not overlap"},
      {header_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", std::string(12, 'x')),
       "starts at data offset 4"},
      {header_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                   std::string(8, 'x')),
       "repeats the key 'a'"},
      {header_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})"), "end before begin"},
      {header_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", std::string(8, 'x')),
       "unexpected field 'x'"},
      {header_file(R"({"__metadata__":{"k":1}})"), "'__metadata__' entry 'k' is not a string"},
      {header_file(R"({"__metadata__":{"k":{"x":"y"}}})"), "'__metadata__' entry 'k' is not a string"},
      {header_file(R"({"__metadata__":{"k":"1","k":"2"}})"), "'__metadata__' repeats the key 'k'"},
      {header_file(R"({"__metadata__":[]})"), "'__metadata__' is not a JSON object"},
      {header_file(R"({"a":[1]})"), "tensor 'a' is not a JSON object"},
      {header_file(R"({"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::string(8, 'x')),
       "tensor 'a' repeats the field 'dtype'"},
      {header_file(R"({"a":{"dtype":["F32"],"shape":[2],"data_offsets":[0,8]}})"), "has no string 'dtype'"},
      {header_file(R"({"a":{"shape":[2],"data_offsets":[0,8]}})"), "has no string 'dtype'"},
      {header_file(R"({"a":{"dtype":"F32","shape":{"0":2},"data_offsets":[0,8]}})"), "has no array 'shape'"},
      {header_file(R"({"a":{"dtype":"F32","shape":[[2]],"data_offsets":[0,8]}})"), "not a non-negative integer"},
      {header_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,16]}})"), "two non-negative integers"},
      {header_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})"), "two non-negative integers"},
      {header_file(R"({"a":{"dtype":"F32","shape":[2]}})"), "two non-negative integers"},
      {header_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} x)", std::string(8, 'x')),
       "is not valid JSON"},
  };
  for (const auto& [bytes, problem] : cases) {
    const auto message = load_error(bytes);
    EXPECT_NE(message.find("'bad.safetensors' is not a valid safetensors file"), std::string::npos) << message;
    EXPECT_NE(message.find(problem), std::string::npos) << "expected '" << problem << "' in: " << message;
  }
}

namespace {
// A header of `count` one-byte tensors, the shape of the header that took 41 s at 25,000 entries
// when the duplicate-key check walked nlohmann's tree per key.
std::string one_byte_tensors(size_t count) {
  std::string json = "{";
  for (size_t i = 0; i < count; ++i) {
    json += (i ? ",\"t" : "\"t") + std::to_string(i) + R"(":{"dtype":"U8","shape":[1],"data_offsets":[)" +
            std::to_string(i) + "," + std::to_string(i + 1) + "]}";
  }
  return header_file(json + "}", std::string(count, 'x'));
}

double cpu_seconds_to_parse(const std::string& bytes, size_t expected_tensors) {
  return acc::testing::least_cpu_seconds(2, [&] {
    const auto header = st::parse_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "big");
    EXPECT_EQ(header.tensors.size(), expected_tensors);
  });
}
}  // namespace

// Linear, not quadratic: sixteen times the entries take about sixteen times as long (a quadratic
// parse takes 256). Both sizes are timed in this run, in CPU time (cpu_time.h), so the ratio holds on
// any machine, busy or not; the bound is the geometric middle of the two outcomes. The large header
// has the most tensors a file may name.
TEST(Safetensors, HeaderParseTimeGrowsLinearlyWithItsEntries) {
  const size_t small = st::kMaxTensors / 16, large = st::kMaxTensors;
  const double small_seconds = cpu_seconds_to_parse(one_byte_tensors(small), small);
  const double large_seconds = cpu_seconds_to_parse(one_byte_tensors(large), large);
  std::cout << small << " tensors: " << small_seconds << " s, " << large << ": " << large_seconds << " s\n";
  EXPECT_LT(large_seconds / small_seconds, 64.0) << "16x the entries took " << large_seconds / small_seconds
                                                 << "x as long";
}

TEST(Safetensors, RefusesMoreTensorsThanTheLimitWhileReadingTheHeader) {
  const std::string file = one_byte_tensors(st::kMaxTensors + 1);
  const auto message = load_error(file);
  EXPECT_NE(message.find("it names more than 1048576 tensors, the most acc reads from one file"), std::string::npos)
      << message;
}

TEST(Safetensors, MissingFileAndUnsupportedDtypeAreClearErrors) {
  ScratchDir dir;
  try {
    st::MappedFile file(dir / "absent.safetensors");
    FAIL() << "no error";
  } catch (const acc::Error& error) {
    EXPECT_NE(std::string(error.what()).find("absent.safetensors"), std::string::npos) << error.what();
  }
  try {
    st::save_file({{"z", at::zeros({2}, at::kComplexDouble)}}, dir / "z.safetensors");
    FAIL() << "no error";
  } catch (const st::FormatError& error) {
    EXPECT_NE(std::string(error.what()).find("tensor 'z' has dtype ComplexDouble"), std::string::npos) << error.what();
  }
}

namespace {
double cpu_seconds_to_parse_index_of(size_t weights) {
  std::string json = R"({"metadata":{"total_size":0},"weight_map":{)";
  for (size_t i = 0; i < weights; ++i) {
    json += (i ? ",\"w" : "\"w") + std::to_string(i) + "\":\"model-0000" + std::to_string(i % 7) + "-of-00007.safetensors\"";
  }
  json += "}}";
  return acc::testing::least_cpu_seconds(2, [&] {
    EXPECT_EQ(st::parse_index(json, "model.safetensors.index.json").weight_map.size(), weights);
  });
}
}  // namespace

// As the header: 16x the weights, about 16x the CPU time, not 256x.
TEST(Safetensors, IndexParseTimeGrowsLinearlyWithItsWeights) {
  const double small = cpu_seconds_to_parse_index_of(1u << 15);
  const double large = cpu_seconds_to_parse_index_of(1u << 19);
  std::cout << (1u << 19) << " weights: " << large << " s\n";
  EXPECT_LT(large / small, 64.0) << "16x the weights took " << large / small << "x as long";
}

TEST(Safetensors, IndexRejectsPathsOutsideItsDirectory) {
  EXPECT_THROW(st::parse_index(R"({"weight_map":{"a":"../x.safetensors"}})", "i.json"), st::FormatError);
  EXPECT_THROW(st::parse_index(R"({"weight_map":{"a":"/etc/passwd"}})", "i.json"), st::FormatError);
  EXPECT_THROW(st::parse_index(R"({"metadata":{"total_size":-1},"weight_map":{}})", "i.json"), st::FormatError);
  const auto index = st::parse_index(R"({"metadata":{"total_size":8},"weight_map":{"a":"m.safetensors"}})", "i.json");
  EXPECT_EQ(index.total_size, 8u);
  EXPECT_EQ(index.weight_map.size(), 1u);
}

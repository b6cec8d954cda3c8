// libFuzzer target for the untrusted-input parsers of checkpoint files (torch-free core):
// the safetensors header parser and the shard index parser. Input byte 0 picks the parser (even:
// safetensors file, odd: index JSON); the rest is the file.
//
// Beyond "no crash, no sanitizer report": an accepted header must describe tensors that lie
// inside the file, writing that header back must parse to the same tensors, and no input takes
// longer to parse than a linear parse with a wide margin (a header of 25,000 entries once took
// 41 s: a parse that is not linear in its input shows up here as an abort, with the input saved).
// The time is the thread's CPU time, not the wall clock: a machine busy with other work (ctest -j)
// must not fail the run, which a 1 s wall-clock bound did for a 2 MiB input parsed in 0.7 s.
#include <acc/safetensors_format.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cpu_time.h"  // test/support

namespace st = acc::safetensors;

namespace {
void check(bool condition) {
  if (!condition) std::abort();
}

void fuzz_file(const uint8_t* data, size_t size) {
  st::Header header;
  try {
    header = st::parse_header(data, size, "fuzz");
  } catch (const st::FormatError&) {
    return;
  }
  uint64_t end = 0;
  for (const auto& tensor : header.tensors) {
    check(tensor.begin == end && tensor.end >= tensor.begin);
    check(header.data_start + tensor.end <= size);
    end = tensor.end;
  }
  // Round trip: the writer's header for the same tensors, followed by the same data.
  auto tensors = header.tensors;
  const std::string bytes = st::serialize_header(tensors, header.metadata) +
                            std::string(reinterpret_cast<const char*>(data) + header.data_start,
                                        size - header.data_start);
  const auto again = st::parse_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "round trip");
  check(again.tensors.size() == header.tensors.size());
  for (size_t i = 0; i < again.tensors.size(); ++i) {
    check(again.tensors[i].name == header.tensors[i].name);
    check(again.tensors[i].dtype == header.tensors[i].dtype);
    check(again.tensors[i].shape == header.tensors[i].shape);
    check(again.tensors[i].end - again.tensors[i].begin == header.tensors[i].end - header.tensors[i].begin);
  }
}

void fuzz_index(const uint8_t* data, size_t size) {
  try {
    const auto index = st::parse_index(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    for (const auto& [name, file] : index.weight_map) {
      check(file.find('/') == std::string::npos && file != ".." && !file.empty());
    }
    check(!st::serialize_index(index).empty());
  } catch (const st::FormatError&) {
  }
}
}  // namespace

// libFuzzer parses its flags after this call, from the argv it leaves. Without -max_len, inputs
// may be as large as the largest file the parser must handle: a header of kMaxHeaderBytes after
// its 8-byte length, plus the selector byte (libFuzzer's own default is the largest seed, capped
// at 1 MiB, and would truncate larger seeds).
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  for (int i = 1; i < *argc; ++i) {
    if (std::strncmp((*argv)[i], "-max_len=", 9) == 0) return 0;
  }
  static std::string flag = "-max_len=" + std::to_string(st::kMaxHeaderBytes + 8 + 1);
  static std::vector<char*> args;
  args.assign(*argv, *argv + *argc);
  args.push_back(flag.data());
  args.push_back(nullptr);
  *argv = args.data();
  *argc += 1;
  std::fprintf(stderr, "acc fuzzer: %s (acc::safetensors::kMaxHeaderBytes + 8 length bytes + 1 selector byte)\n",
               flag.c_str());
  return 0;
}

namespace {
// A linear parse takes about 0.35 us a byte under the sanitizers (0.7 s for 2 MiB). The bound allows
// 1 s plus 2 us a byte: 5 s for 2 MiB, where the quadratic parse once fixed took 41 s (and the
// phase over a large file feeds inputs of that size).
double cpu_seconds_allowed(size_t size) { return 1.0 + 2e-6 * static_cast<double>(size); }
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const double start = acc::testing::thread_cpu_seconds();
  if (data[0] % 2 == 0) {
    fuzz_file(data + 1, size - 1);
  } else {
    fuzz_index(data + 1, size - 1);
  }
  const double seconds = acc::testing::thread_cpu_seconds() - start;
  if (seconds >= cpu_seconds_allowed(size)) {
    std::fprintf(stderr,
                 "acc fuzzer: an input of %zu bytes took %.2f s of CPU to parse; the bound for its size is %.2f s "
                 "(1 s + 2 us a byte): the parse is not linear in its input\n",
                 size, seconds, cpu_seconds_allowed(size));
    std::abort();
  }
  return 0;
}

// Big-model loading, acc against Python Accelerate on the same checkpoint files: a ~2 GB fp32 model
// (a Sequential whose one child "layers" is a Sequential of Linear(4096, 4096), named alike in
// big_model_load.py) is saved once as sharded safetensors (save_model, 500MB shards + index), then
// loaded in fresh processes, alternating acc and Python (ABAB...), for the device maps {"": "cpu"}
// and {"": "disk"}:
//   load         empty construction (init_empty_weights) + load_checkpoint_and_dispatch
//   first fwd    one forward of a 4 x 4096 input right after loading
//   peak RSS     the process's VmHWM at the end (file pages mapped at the time count too)
// acc's "disk" reads only the shards' headers at load and maps each layer from the checkpoint
// around its forward. Python's "disk" is load_checkpoint_and_dispatch with an offload_folder:
// Accelerate 1.15 reads every weight and writes it again there (numpy .dat files), never pointing
// at the checkpoint's files (and {"": "disk"} alone fails, see big_model_load.py). Its other way,
// dispatch_model with an offload_index naming the checkpoint's own files (what transformers'
// from_pretrained does), is a third row. Python's "cpu" weights are zero-copy views of the
// safetensors mappings (read at first touch, i.e. in the first forward); acc's are too, read
// ahead at load (MADV_WILLNEED): compare load + first forward.
//
// Every run is a child process (its own page cache use and RSS). Cold by default: the checkpoint's
// pages are evicted (posix_fadvise DONTNEED) before each run, so each side reads from the disk, as
// a process that loads a model it has not just written does. "warm" reads the files once before
// each run instead. OMP_NUM_THREADS is the same for both sides (1 unless set).
//
// usage: acc_bench_big_model_load [size_gb 2] [pairs 2] [cold|warm]
//        acc_bench_big_model_load --child MAP DIR WIDTH LAYERS BATCH   (one acc run; prints RESULT)
// Prints a table of medians and the ratios acc / Python (< 1: acc faster or smaller). Not a test.
#include <ATen/ops/linspace.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <acc/big_modeling.h>
#include <acc/checkpoint_model.h>
#include <acc/device_map.h>

#include "memory.h"
#include "timing.h"

#ifndef ACC_PYTHON
#define ACC_PYTHON "/root/.cache/acc/venv/bin/python"
#endif
#ifndef ACC_BIG_MODEL_LOAD_PY
#define ACC_BIG_MODEL_LOAD_PY "bench/inference/big_model_load.py"
#endif

namespace {

constexpr int64_t kWidth = 4096, kBatch = 4;
constexpr const char* kShardSize = "500MB";

// A Sequential that a Sequential can hold: libtorch's AnyModule needs a forward with concrete
// types, which Sequential's templated forward is not. Still a SequentialImpl, so acc calls its
// children's hooks as for any Sequential.
struct StackImpl : torch::nn::SequentialImpl {
  torch::Tensor forward(torch::Tensor x) { return SequentialImpl::forward(std::move(x)); }
};
TORCH_MODULE(Stack);

// The same structure and names as big_model_load.py's make_model: "layers.0.weight", ...
torch::nn::Sequential make_model(int64_t width, int64_t layers) {
  Stack stack;
  for (int64_t i = 0; i < layers; ++i) stack->push_back(torch::nn::Linear(width, width));
  torch::nn::Sequential model;
  model->push_back("layers", stack);
  return model;
}

// One measured acc run, in its own process: prints the same RESULT line as big_model_load.py.
int child(const std::string& map, const std::string& dir, int64_t width, int64_t layers, int64_t batch) {
  const double base_rss = acc::bench::status_mib("VmRSS");
  auto start = std::chrono::steady_clock::now();
  torch::nn::Sequential model = nullptr;
  {
    acc::init_empty_weights empty;
    model = make_model(width, layers);
  }
  model->eval();
  acc::load_checkpoint_and_dispatch(model, dir, acc::DeviceMap{{"", map}});
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  torch::NoGradGuard no_grad;
  const auto x = at::linspace(-1, 1, batch * width).reshape({batch, width});
  start = std::chrono::steady_clock::now();
  const auto y = model->forward(x);
  const double forward_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("RESULT %.1f %.1f %.1f %.1f %.9g\n", load_ms, forward_ms, acc::bench::status_mib("VmHWM"), base_rss,
              y.to(torch::kDouble).sum().item<double>());
  return 0;
}

// Not std::filesystem::remove_all: libtorch.so exports a copy of it that crashes.
void remove_tree(const std::string& path) {
  ::nftw(
      path.c_str(), [](const char* entry, const struct stat*, int, struct FTW*) { return ::remove(entry); }, 16,
      FTW_DEPTH | FTW_PHYS);
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> files;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* entry = ::readdir(d)) {
      if (entry->d_name[0] != '.') files.push_back(dir + "/" + entry->d_name);
    }
    ::closedir(d);
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Cold: drop the files' pages from the page cache. Warm: read them into it.
void prepare_cache(const std::vector<std::string>& files, bool warm) {
  std::vector<char> block(warm ? (16u << 20) : 0);
  for (const auto& file : files) {
    const int fd = ::open(file.c_str(), O_RDONLY);
    if (fd < 0) continue;
    if (warm) {
      while (::read(fd, block.data(), block.size()) > 0) {
      }
    } else {
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    }
    ::close(fd);
  }
}

struct Result {
  double load_ms = 0, forward_ms = 0, peak_mib = 0, base_mib = 0, output_sum = 0;
  double total_ms = 0;  // load + first forward of the same run
};

// Runs `argv` with stdout and stderr captured; exits the benchmark with its output if it fails or
// prints no RESULT line.
Result run(const std::vector<std::string>& argv, const std::string& threads, const std::string& cleanup) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) std::abort();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipe_fds[1], 1);
    ::dup2(pipe_fds[1], 2);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    ::setenv("OMP_NUM_THREADS", threads.c_str(), 1);
    std::vector<char*> args;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
    std::_Exit(127);
  }
  ::close(pipe_fds[1]);
  std::string output;
  char buffer[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) != 0;) {
    if (n > 0) output.append(buffer, static_cast<size_t>(n));
    if (n < 0 && errno != EINTR) break;
  }
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const auto at = output.find("RESULT ");
  Result result;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || at == std::string::npos ||
      !(std::istringstream(output.substr(at + 7)) >> result.load_ms >> result.forward_ms >> result.peak_mib >>
        result.base_mib >> result.output_sum)) {
    std::fprintf(stderr, "acc_bench_big_model_load: this run failed:\n  ");
    for (const auto& arg : argv) std::fprintf(stderr, "%s ", arg.c_str());
    std::fprintf(stderr, "\n%s\n", output.c_str());
    remove_tree(cleanup);
    std::exit(1);
  }
  result.total_ms = result.load_ms + result.forward_ms;
  return result;
}

struct Variant {
  std::string map;    // "cpu" or "disk": what the ratios pair up
  std::string side;   // "acc" or "python"
  std::string label;  // the table's row
  std::string python_map;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--child") {
    if (argc != 7) return 2;
    return child(argv[2], argv[3], std::atoll(argv[4]), std::atoll(argv[5]), std::atoll(argv[6]));
  }
  const double size_gb = argc > 1 ? std::atof(argv[1]) : 2.0;
  const int pairs = argc > 2 ? std::atoi(argv[2]) : 2;
  const std::string cache = argc > 3 ? argv[3] : "cold";
  if (size_gb <= 0 || pairs < 1 || (cache != "cold" && cache != "warm") || argc > 4) {
    std::fprintf(stderr, "usage: acc_bench_big_model_load [size_gb 2] [pairs 2] [cold|warm]\n");
    return 2;
  }
  const std::string python = ACC_PYTHON, script = ACC_BIG_MODEL_LOAD_PY;
  if (::access(python.c_str(), X_OK) != 0 || ::access(script.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "acc_bench_big_model_load: needs %s and %s\n", python.c_str(), script.c_str());
    return 1;
  }
  const char* threads_env = std::getenv("OMP_NUM_THREADS");
  const std::string threads = threads_env != nullptr && *threads_env != '\0' ? threads_env : "1";
  const int64_t layers =
      std::max<int64_t>(1, std::llround(size_gb * 1e9 / (4.0 * static_cast<double>(kWidth * kWidth + kWidth))));

  const char* tmp_env = std::getenv("TMPDIR");
  std::string work =
      std::string(tmp_env != nullptr && *tmp_env != '\0' ? tmp_env : "/tmp") + "/acc_bench_big_model.XXXXXX";
  if (::mkdtemp(work.data()) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string checkpoint = work + "/checkpoint";

  // The checkpoint, written once by acc; both sides read these files.
  uint64_t bytes = 0;
  {
    const double ms = acc::bench::time_ms([&] {
      torch::manual_seed(0);
      auto model = make_model(kWidth, layers);
      for (const auto& p : model->parameters()) bytes += static_cast<uint64_t>(p.numel()) * p.element_size();
      acc::save_model(model, checkpoint, kShardSize);
    });
    std::printf(
        "checkpoint: %.2f GB fp32, %lld x Linear(%lld, %lld), %zu files (%s shards + index) in %s, "
        "built and written in %.1f s\n",
        static_cast<double>(bytes) / 1e9, static_cast<long long>(layers), static_cast<long long>(kWidth),
        static_cast<long long>(kWidth), files_in(checkpoint).size(), kShardSize, checkpoint.c_str(), ms / 1000);
  }
  std::printf(
      "runs: %d pairs, each run a fresh process, acc and Python alternating; %s page cache (%s); "
      "OMP_NUM_THREADS=%s; first forward on a %lld x %lld batch\n\n",
      pairs, cache.c_str(),
      cache == "cold" ? "checkpoint evicted with posix_fadvise(DONTNEED) before each run"
                      : "checkpoint read once before each run",
      threads.c_str(), static_cast<long long>(kBatch), static_cast<long long>(kWidth));

  const std::vector<Variant> variants = {
      {"cpu", "acc", "acc", ""},
      {"cpu", "python", "accelerate", "cpu"},
      {"disk", "acc", "acc", ""},
      {"disk", "python", "accelerate (offload_folder)", "disk"},
      {"disk-index", "python", "accelerate (offload_index)", "disk-index"},
  };
  const auto files = files_in(checkpoint);
  const std::vector<std::string> model_args = {checkpoint, std::to_string(kWidth), std::to_string(layers),
                                               std::to_string(kBatch)};
  std::map<std::string, std::vector<Result>> results;  // by label + map
  std::vector<double> sums;
  for (int pair = 0; pair < pairs; ++pair) {
    for (const auto& v : variants) {
      const std::string offload = work + "/offload";
      std::vector<std::string> args = v.side == "acc" ? std::vector<std::string>{"/proc/self/exe", "--child", v.map}
                                                      : std::vector<std::string>{python, script, v.python_map};
      args.insert(args.end(), model_args.begin(), model_args.end());
      if (v.python_map == "disk") args.push_back(offload);
      prepare_cache(files, cache == "warm");
      const Result r = run(args, threads, work);
      remove_tree(offload);  // Python's copy of the weights; the next run writes its own
      ::sync();              // no write-back of one run's files left to slow the next
      const std::string map = v.map == "disk-index" ? "disk" : v.map;
      std::printf("pair %d  %-5s %-28s load %8.1f ms  first fwd %8.1f ms  peak RSS %7.1f MiB (%.1f at start)\n",
                  pair + 1, map.c_str(), v.label.c_str(), r.load_ms, r.forward_ms, r.peak_mib, r.base_mib);
      std::fflush(stdout);
      results[v.label + "|" + v.map].push_back(r);
      sums.push_back(r.output_sum);
    }
  }

  auto median_of = [&](const Variant& v, double Result::*field) {
    std::vector<double> values;
    for (const auto& r : results[v.label + "|" + v.map]) values.push_back(r.*field);
    return acc::bench::median(values);
  };
  std::printf("\nmedians of %d runs each (the upper middle one for an even count), %s\n", pairs, cache.c_str());
  std::printf("%-5s %-28s %10s %12s %12s %14s %14s\n", "map", "side", "load ms", "1st fwd ms", "load+fwd ms",
              "peak RSS MiB", "RSS start MiB");
  for (const auto& v : variants) {
    std::printf("%-5s %-28s %10.1f %12.1f %12.1f %14.1f %14.1f\n", v.map == "disk-index" ? "disk" : v.map.c_str(),
                v.label.c_str(), median_of(v, &Result::load_ms), median_of(v, &Result::forward_ms),
                median_of(v, &Result::total_ms), median_of(v, &Result::peak_mib), median_of(v, &Result::base_mib));
  }

  std::printf("\nratios acc / Python (< 1: acc faster or smaller); peak RSS also above each process's start\n");
  auto ratio_row = [&](const Variant& a, const Variant& p) {
    const double al = median_of(a, &Result::load_ms), pl = median_of(p, &Result::load_ms);
    const double af = median_of(a, &Result::forward_ms), pf = median_of(p, &Result::forward_ms);
    const double at = median_of(a, &Result::total_ms), pt = median_of(p, &Result::total_ms);
    const double ap = median_of(a, &Result::peak_mib), pp = median_of(p, &Result::peak_mib);
    const double ab = median_of(a, &Result::base_mib), pb = median_of(p, &Result::base_mib);
    std::printf("%-5s vs %-28s load %6.3g  first fwd %6.3g  load+fwd %6.3g  peak RSS %6.3g  peak above start %6.3g\n",
                a.map.c_str(), p.label.c_str(), al / pl, af / pf, at / pt, ap / pp, (ap - ab) / (pp - pb));
  };
  ratio_row(variants[0], variants[1]);
  ratio_row(variants[2], variants[3]);
  ratio_row(variants[2], variants[4]);

  // Same files, same input: every run must compute the same output.
  const auto [low, high] = std::minmax_element(sums.begin(), sums.end());
  const double spread = std::abs(*high - *low) / std::max(1e-12, std::abs(*high));
  std::printf("\noutputs: sum %.9g in every run (relative spread %.1e)%s\n", *high, spread,
              spread < 1e-4 ? "" : "  <-- MISMATCH: the runs computed different outputs");
  remove_tree(work);
  return spread < 1e-4 ? 0 : 1;
}

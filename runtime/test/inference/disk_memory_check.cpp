// The memory bound of "disk" dispatch, measured: a model whose weights all stay on disk runs a
// forward with RssAnon growing by less than its largest layer plus the activations, and runs
// inside a memory cgroup half the model's size (where none can be made, with its address space
// limited to that much more than at start), where the same model built and loaded as usual fails.
//
// usage: acc_disk_memory_check DIRECTORY          (the check; exits non-zero on failure)
//        acc_disk_memory_check DIRECTORY --child MAP BYTES  (one limited run; MAP is "disk", or
//                                                            "memory": built and loaded as usual;
//                                                            BYTES the address-space limit or 0)
// ACC_DISK_CHECK_NO_CGROUP=1 takes the address-space path even where a cgroup could be made.
#include <torch/torch.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include <acc/big_modeling.h>
#include <acc/checkpoint_model.h>
#include <acc/hooks.h>
#include <acc/safetensors.h>

namespace {

constexpr int kLayers = 32, kWidth = 2048, kBatch = 16;

torch::nn::Sequential make_model() {
  torch::nn::Sequential model;
  for (int i = 0; i < kLayers; ++i) {
    model->push_back(torch::nn::Linear(kWidth, kWidth));
    model->push_back(torch::nn::Tanh());
  }
  return model;
}

int64_t status_kb(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field, 0) == 0) return std::stoll(line.substr(std::string(field).size()));
  }
  return -1;
}

torch::Tensor load_one(const std::string& path, const std::string& name) {
  return acc::safetensors::MappedFile(path).tensor(name).clone();
}

// Drops the file's clean pages from the page cache, so that whoever reads it next is charged.
void evict(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// A fresh memory cgroup beside this process's own, limited to `bytes`; "" when none can be made.
std::string make_cgroup(uint64_t bytes) {
  std::ifstream self("/proc/self/cgroup");
  std::string line;
  while (std::getline(self, line)) {
    const auto first = line.find(':'), second = line.find(':', first + 1);
    const auto controllers = line.substr(first + 1, second - first - 1);
    const auto path = line.substr(second + 1);
    std::string base, limit_file;
    if (controllers == "memory") {
      base = "/sys/fs/cgroup/memory" + path;
      limit_file = "memory.limit_in_bytes";
    } else if (controllers.empty() && line.rfind("0::", 0) == 0) {
      base = "/sys/fs/cgroup" + path;
      limit_file = "memory.max";
    } else {
      continue;
    }
    const std::string group = base + "/acc-disk-check-" + std::to_string(::getpid());
    if (::mkdir(group.c_str(), 0755) != 0) continue;
    std::ofstream(group + "/" + limit_file) << bytes;
    std::ofstream(group + "/memory.memsw.limit_in_bytes") << bytes;  // v1 with swap accounting
    std::ifstream check(group + "/" + limit_file);
    uint64_t set = 0;
    if (check >> set && set <= bytes) return group;
    ::rmdir(group.c_str());
  }
  return "";
}

// Runs this program's --child mode in `cgroup`, or with its address space limited to its size at
// start plus `limit` when there is no cgroup.
int run_child(const std::string& self, const std::string& dir, const std::string& map,
              const std::string& cgroup, uint64_t limit) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (!cgroup.empty()) std::ofstream(cgroup + "/cgroup.procs") << ::getpid();
    if (map == "memory") {  // its failure is the expected outcome: keep its message out of the log
      const int null = ::open("/dev/null", O_WRONLY);
      if (null >= 0) ::dup2(null, STDERR_FILENO);
    }
    const std::string address_space = cgroup.empty() ? std::to_string(limit) : "0";
    ::execl(self.c_str(), self.c_str(), dir.c_str(), "--child", map.c_str(), address_space.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// One limited run: the forward's output against the expected one.
int child_main(const std::string& dir, const std::string& map, uint64_t address_space) {
  if (address_space > 0) {
    const uint64_t now = static_cast<uint64_t>(status_kb("VmSize:")) * 1024;
    rlimit limit{now + address_space, now + address_space};
    ::setrlimit(RLIMIT_AS, &limit);
  }
  torch::nn::Sequential model{nullptr};
  if (map == "memory") {  // the control: the model built and loaded as usual, in anonymous memory
    model = make_model();
    acc::load_checkpoint_in_model(model, dir + "/checkpoint");
  } else {
    {
      acc::init_empty_weights empty;
      model = make_model();
    }
    acc::load_checkpoint_and_dispatch(model, dir + "/checkpoint", map);
  }
  torch::NoGradGuard no_grad;
  const auto output = model->forward(load_one(dir + "/io.safetensors", "input"));
  return torch::equal(output, load_one(dir + "/io.safetensors", "output")) ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: acc_disk_memory_check DIRECTORY\n";
    return 2;
  }
  const std::string dir = argv[1];
  at::set_num_threads(1);
  if (argc >= 5 && std::string(argv[2]) == "--child") return child_main(dir, argv[3], std::stoull(argv[4]));

  uint64_t model_bytes = 0, largest_layer = 0;
  {
    torch::manual_seed(0);
    auto reference = make_model();
    for (const auto& child : reference->children()) {
      uint64_t bytes = 0;
      for (const auto& p : child->parameters()) bytes += p.numel() * p.element_size();
      largest_layer = std::max(largest_layer, bytes);
      model_bytes += bytes;
    }
    const auto input = torch::randn({kBatch, kWidth});
    torch::NoGradGuard no_grad;
    acc::safetensors::save_file({{"input", input}, {"output", reference->forward(input)}},
                                dir + "/io.safetensors");
    acc::save_model(reference, dir + "/checkpoint");
  }
  evict(dir + "/checkpoint/model.safetensors");

  // 1. RssAnon during a disk-dispatched forward, sampled around every layer.
  torch::nn::Sequential model{nullptr};
  {
    acc::init_empty_weights empty;
    model = make_model();
  }
  acc::load_checkpoint_and_dispatch(model, dir + "/checkpoint", "disk");
  const auto input = load_one(dir + "/io.safetensors", "input");
  int64_t peak_kb = 0;
  uint64_t activations = 0;
  for (const auto& child : model->children()) {
    acc::register_forward_hook(*child, [&](torch::nn::Module&, acc::ForwardArgs& args) {
      peak_kb = std::max(peak_kb, status_kb("RssAnon:"));
      uint64_t bytes = 0;
      for (auto* in : args.inputs) bytes += in->numel() * in->element_size();
      if (args.output != nullptr) bytes += args.output->numel() * args.output->element_size();
      activations = std::max(activations, bytes);
    });
  }
  acc::hook_sequential(*model);
  const int64_t before_kb = status_kb("RssAnon:");
  torch::Tensor output;
  {
    torch::NoGradGuard no_grad;
    output = model->forward(input);
  }
  const uint64_t grown = static_cast<uint64_t>(std::max<int64_t>(0, peak_kb - before_kb)) * 1024;
  const bool equal = torch::equal(output, load_one(dir + "/io.safetensors", "output"));
  std::printf("model %.1f MB, largest layer %.1f MB, activations %.2f MB; RssAnon grew %.2f MB "
              "during the disk forward; output %s\n",
              model_bytes / 1e6, largest_layer / 1e6, activations / 1e6, grown / 1e6,
              equal ? "bit-identical" : "DIFFERS");
  bool ok = equal && grown < largest_layer + activations;
  if (grown >= largest_layer + activations) std::printf("FAIL: RssAnon grew more than the bound\n");

  // 2. Under a limit of half the model: disk runs, in-memory weights do not.
  const uint64_t limit = model_bytes / 2;
  std::string self(4096, '\0');
  self.resize(static_cast<size_t>(std::max<ssize_t>(0, ::readlink("/proc/self/exe", self.data(), self.size()))));
  for (const char* map : {"disk", "memory"}) {
    evict(dir + "/checkpoint/model.safetensors");
    const std::string cgroup = std::getenv("ACC_DISK_CHECK_NO_CGROUP") ? "" : make_cgroup(limit);
    const int code = run_child(self, dir, map, cgroup, limit);
    if (!cgroup.empty()) ::rmdir(cgroup.c_str());
    std::printf("under %s of %.1f MB, weights on %s: exit %d\n",
                cgroup.empty() ? "an address-space limit (no memory cgroup could be made)" : "a memory cgroup",
                limit / 1e6, map, code);
    const bool expected_ok = std::string(map) == "disk";
    if ((code == 0) != expected_ok) {
      std::printf("FAIL: expected the %s run to %s\n", map, expected_ok ? "succeed" : "be stopped by the limit");
      ok = false;
    }
  }
  std::printf(ok ? "disk memory check passed\n" : "disk memory check FAILED\n");
  return ok ? 0 : 1;
}

#include "system_info.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>

#include <acc_common/path_kind.h>

#include "rank_environment.h"
#include "spawn.h"

namespace acc::launcher {
namespace fs = std::filesystem;
namespace {

// Version files under $ACC_TORCH_DIR or $ACC_VENV (paths the user names): read only when they are
// regular files of a sane size, so that a FIFO or a device there cannot block acc-env. "" otherwise.
std::string read_file(const fs::path& path) {
  return common::read_regular_file(path.string(), 1 << 20, nullptr).value_or("");
}

std::string env_value(const EnvMap& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() ? "" : it->second;
}

// Version of a pip distribution from its .dist-info directory name ("nvidia_nccl_cu13-2.28.9.dist-info").
std::string dist_version(const fs::path& site_packages, const std::string& name_prefix) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(site_packages, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(name_prefix, 0) != 0 || name.size() < 10 || name.substr(name.size() - 10) != ".dist-info") continue;
    const size_t dash = name.find('-', name_prefix.size());
    if (dash != std::string::npos) return name.substr(dash + 1, name.size() - 10 - dash - 1);
  }
  return "";
}

std::optional<TorchInstall> torch_package(const fs::path& package) {
  const std::string version_py = read_file(package / "version.py");
  if (version_py.empty()) return std::nullopt;
  TorchInstall torch;
  torch.location = package.string();
  std::smatch match;
  if (std::regex_search(version_py, match, std::regex(R"(__version__\s*=\s*'([^']*)')"))) torch.version = match[1];
  if (std::regex_search(version_py, match, std::regex(R"(\ncuda[^=]*=\s*'([^']*)')"))) torch.cuda = match[1];
  torch.nccl = dist_version(package.parent_path(), "nvidia_nccl");
  torch.cudnn = dist_version(package.parent_path(), "nvidia_cudnn");
  return torch;
}

std::optional<TorchInstall> libtorch_directory(const fs::path& dir) {
  // A libtorch zip ships build-version ("2.5.1+cu124").
  std::string version = read_file(dir / "build-version");
  if (version.empty()) return std::nullopt;
  while (!version.empty() && std::isspace(static_cast<unsigned char>(version.back()))) version.pop_back();
  TorchInstall torch;
  torch.location = dir.string();
  torch.version = version;
  if (auto plus = version.find("+cu"); plus != std::string::npos) torch.cuda = version.substr(plus + 3);
  return torch;
}

}  // namespace

MachineFacts probe_machine(const EnvMap& env) {
  MachineFacts facts;
  facts.cpu_count = usable_cpu_count();
  auto visible = env.find("CUDA_VISIBLE_DEVICES");
  if (visible != env.end()) {
    // CUDA stops at the first invalid entry; "" and "-1" hide every GPU.
    int count = 0;
    size_t start = 0;
    const std::string& list = visible->second;
    while (start < list.size()) {
      const size_t comma = list.find(',', start);
      const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (item.empty() || item[0] == '-') break;
      ++count;
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    facts.gpu_count = count;
  } else {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
      (void)entry;
      ++facts.gpu_count;
    }
  }
  return facts;
}

int usable_cpu_count() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(online) : 1;
}

double total_memory_gib() {
  struct sysinfo info {};
  if (::sysinfo(&info) != 0) return 0;
  return static_cast<double>(info.totalram) * info.mem_unit / (1024.0 * 1024.0 * 1024.0);
}

std::string platform_description() {
  struct utsname u {};
  ::uname(&u);
  std::string out = std::string(u.sysname) + " " + u.release + " " + u.machine;
  const std::string os_release = read_file("/etc/os-release");
  std::smatch match;
  if (std::regex_search(os_release, match, std::regex("PRETTY_NAME=\"([^\"]*)\""))) out += " (" + match[1].str() + ")";
  return out;
}

std::string compiler_description() {
#if defined(__clang__)
  return "Clang " __clang_version__;
#elif defined(__GNUC__)
  return "GCC " __VERSION__;
#else
  return "unknown";
#endif
}

std::optional<std::string> capture_output(const std::vector<std::string>& argv, double timeout_s) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
  SpawnRequest request;
  request.argv = argv;
  request.envp = to_envp(current_environment());
  request.stdout_fd = fds[1];
  const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  request.stderr_fd = null_fd;
  const SpawnResult child = spawn(request);
  ::close(fds[1]);
  if (null_fd >= 0) ::close(null_fd);
  if (child.pid < 0) {
    ::close(fds[0]);
    return std::nullopt;
  }
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buffer[4096];
    const ssize_t got = ::read(fds[0], buffer, sizeof(buffer));
    if (got <= 0) break;
    out.append(buffer, static_cast<size_t>(got));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(-child.pid, SIGKILL);
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  if (timed_out || child.exec_errno != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return out;
}

std::optional<TorchInstall> find_torch(const EnvMap& env) {
  std::vector<fs::path> candidates;
  if (auto dir = env_value(env, "ACC_TORCH_DIR"); !dir.empty()) candidates.emplace_back(dir);
  std::string venv = env_value(env, "ACC_VENV");
  if (venv.empty()) venv = env_value(env, "HOME") + "/.cache/acc/venv";
  std::error_code ec;
  for (const auto& lib : fs::directory_iterator(fs::path(venv) / "lib", ec))
    candidates.push_back(lib.path() / "site-packages" / "torch");
  for (const auto& candidate : candidates) {
    if (auto torch = torch_package(candidate)) return torch;
    if (auto torch = libtorch_directory(candidate)) return torch;
  }
  return std::nullopt;
}

}  // namespace acc::launcher

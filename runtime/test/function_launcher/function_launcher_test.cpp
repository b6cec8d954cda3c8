// acc::launch: ranks forked from the test process on loopback. Ranks report through files in a
// per-test directory (a failed check inside a rank throws, which acc::launch turns into a
// LaunchError here). Cases that change process-wide state (torch threads, SIGINT, the caller's
// death) run in a forked helper so that the test process stays as it was.
#include <gtest/gtest.h>

#include <acc/acc.h>
#include <acc/warnings.h>

#include <arpa/inet.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "env_fixture.h"
#include "error_text.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// A directory of its own per test, removed afterwards. Not with std::filesystem::remove_all: the
// torch wheel's libtorch.so exports a copy of it that crashes (docs/runtime.md, "Checked on a GPU").
class FunctionLauncher : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "acc-launch-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { ::nftw(dir_.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

  fs::path file(const std::string& name) const { return dir_ / name; }
  fs::path dir_;

 private:
  static int remove_entry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }
};

// In a rank: a check whose failure reaches the test as the rank's LaunchError.
void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("check failed in rank " + std::string(std::getenv("RANK")) + ": " + what);
}

std::string env_or(const char* name, const std::string& fallback = "(unset)") {
  const char* value = std::getenv(name);
  return value ? value : fallback;
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

// Written whole or not at all, for files another process waits for.
void publish(const fs::path& path, const std::string& text) {
  write_file(path.string() + ".tmp", text);
  fs::rename(path.string() + ".tmp", path);
}

void wait_for(const fs::path& path) {
  while (!fs::exists(path)) std::this_thread::sleep_for(milliseconds(10));
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// key=value lines, as the ranks write them.
std::map<std::string, std::string> read_fields(const fs::path& path) {
  std::map<std::string, std::string> fields;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) fields[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return fields;
}

// Dead: gone, or a zombie nobody reaped yet (an orphan waits for init).
bool process_dead(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() || text[close + 2] == 'Z' || text[close + 2] == 'X';
}

bool dead_within(pid_t pid, milliseconds limit) {
  const auto until = Clock::now() + limit;
  while (!process_dead(pid)) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return true;
}

// Nothing forked is left unreaped: the test process has no child at all.
bool no_children_left() { return ::waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD; }

pid_t pid_in(const fs::path& path) { return static_cast<pid_t>(std::stol(read_file(path))); }

// Runs `body` in a forked helper process (with a hard deadline) and returns its exit code; `body`
// returns 0 for success or a code that names the failed check.
int run_isolated(const std::function<int()>& body, seconds limit = seconds(120)) {
  std::cout.flush();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(static_cast<unsigned>(limit.count()));
    int code = 99;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::cerr << "isolated helper threw: " << e.what() << std::endl;
      code = 98;
    }
    std::cout.flush();
    std::cerr.flush();
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

acc::AcceleratorOptions cpu_options() { return acc::AcceleratorOptions().cpu(true).timeout(seconds(120)); }

// --- ranks run, join one job and all-reduce ---------------------------------------------------

class Ranks : public FunctionLauncher, public ::testing::WithParamInterface<int> {};

TEST_P(Ranks, EachRankAllReducesAndReports) {
  const int n = GetParam();
  const fs::path dir = dir_;
  acc::launch(
      [dir] {
        acc::Accelerator accelerator(cpu_options());
        const int rank = accelerator.process_index();
        check(accelerator.num_processes() == std::atoi(env_or("WORLD_SIZE").c_str()), "num_processes is WORLD_SIZE");
        check(rank == std::atoi(env_or("RANK").c_str()), "process_index is RANK");
        auto sum = acc::reduce(torch::tensor({static_cast<double>(rank + 1)}), "sum");
        const int n = accelerator.num_processes();
        check(sum.item<double>() == n * (n + 1) / 2.0, "sum " + std::to_string(sum.item<double>()));
        write_file(dir / ("rank_" + std::to_string(rank)),
                   "sum=" + std::to_string(static_cast<int>(sum.item<double>())) + "\nworld=" + std::to_string(n) +
                       "\njob=" + env_or("ACC_JOB_ID") + "\nport=" + env_or("MASTER_PORT") + "\n");
      },
      n);
  std::set<std::string> jobs;
  for (int rank = 0; rank < n; ++rank) {
    auto fields = read_fields(file("rank_" + std::to_string(rank)));
    EXPECT_EQ(fields["sum"], std::to_string(n * (n + 1) / 2)) << "rank " << rank;
    EXPECT_EQ(fields["world"], std::to_string(n)) << "rank " << rank;
    EXPECT_EQ(fields["job"].size(), 16u) << "rank " << rank << ": 16 hex digits";
    jobs.insert(fields["job"]);
  }
  EXPECT_EQ(jobs.size(), 1u) << "every rank of one call has the same job id";
  EXPECT_FALSE(fs::exists(file("rank_" + std::to_string(n))));
  EXPECT_TRUE(no_children_left());
  EXPECT_EQ(std::getenv("RANK"), nullptr) << "the caller's environment is left alone";
}

INSTANTIATE_TEST_SUITE_P(OneMachine, Ranks, ::testing::Values(1, 2, 4),
                         [](const auto& info) { return std::to_string(info.param) + "Ranks"; });

// Training on several processes without a prepared model trains each copy on its own (weights
// drift apart, exit 0): named at the first backward, once, by the main process only.
TEST_F(FunctionLauncher, BackwardWithoutAPreparedModelIsNamedOnceOnTheMainProcess) {
  const fs::path dir = dir_;
  acc::launch(
      [dir] {
        std::string seen;
        acc::set_warning_handler([&seen](const std::string& message) { seen += message + "\n"; });
        acc::Accelerator accelerator(cpu_options());
        auto model = torch::nn::Linear(2, 1);
        for (int i = 0; i < 3; ++i) accelerator.backward(model->forward(torch::ones({1, 2})).sum());
        write_file(dir / ("rank_" + std::to_string(accelerator.process_index())), seen);
      },
      2);
  const std::string main = read_file(file("rank_0"));
  EXPECT_NE(main.find("acc: warning: backward() runs on 2 processes but no model was prepared"), std::string::npos)
      << main;
  EXPECT_NE(main.find("accelerator.prepare(model, optimizer)"), std::string::npos) << main;
  EXPECT_EQ(std::count(main.begin(), main.end(), '\n'), 1) << main;
  EXPECT_EQ(read_file(file("rank_1")), "");
}

TEST_F(FunctionLauncher, RanksGetAccLaunchsEnvironment) {
  const fs::path dir = dir_;
  // Left over from a launcher that started this program: must not reach the ranks.
  ::setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  ::setenv("ACC_STORE_LISTEN_FD", "1234", 1);
  acc::launch(
      [dir] {
        std::string text;
        for (const char* name :
             {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
              "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_USE_AGENT_STORE", "ACCELERATE_MIXED_PRECISION",
              "ACCELERATE_USE_CPU", "ACC_STORE_LISTEN_FD", "OMP_NUM_THREADS", "EXTRA_VARIABLE"}) {
          text += std::string(name) + "=" + env_or(name) + "\n";
        }
        text += "threads=" + std::to_string(at::get_num_threads()) + "\n";
        // Rank 0's inherited socket listens on MASTER_PORT.
        if (const char* fd_text = std::getenv("ACC_STORE_LISTEN_FD"); fd_text && env_or("RANK") == "0") {
          const int fd = std::atoi(fd_text);
          sockaddr_storage address{};
          socklen_t length = sizeof(address);
          int listening = 0;
          socklen_t size = sizeof(listening);
          if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0 &&
              ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) == 0) {
            const auto* in = reinterpret_cast<sockaddr_in*>(&address);
            text += "listen_port=" + std::to_string(ntohs(in->sin_port)) + "\nlistening=" + std::to_string(listening) +
                    "\n";
          }
        }
        write_file(dir / ("rank_" + env_or("RANK")), text);
      },
      3,
      acc::LaunchOptions()
          .mixed_precision(acc::MixedPrecision::BF16)
          .cpu(true)
          .num_cpu_threads_per_process(1)
          .env({{"EXTRA_VARIABLE", "extra value"}}));
  ::unsetenv("TORCHELASTIC_USE_AGENT_STORE");
  ::unsetenv("ACC_STORE_LISTEN_FD");

  std::string port;
  for (int rank = 0; rank < 3; ++rank) {
    auto v = read_fields(file("rank_" + std::to_string(rank)));
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(v["RANK"], std::to_string(rank));
    EXPECT_EQ(v["LOCAL_RANK"], std::to_string(rank));
    EXPECT_EQ(v["WORLD_SIZE"], "3");
    EXPECT_EQ(v["LOCAL_WORLD_SIZE"], "3");
    EXPECT_EQ(v["GROUP_RANK"], "0");
    EXPECT_EQ(v["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(v["TORCHELASTIC_RESTART_COUNT"], "0");
    EXPECT_EQ(v["TORCHELASTIC_USE_AGENT_STORE"], "(unset)");
    EXPECT_EQ(v["ACCELERATE_MIXED_PRECISION"], "bf16");
    EXPECT_EQ(v["ACCELERATE_USE_CPU"], "True");
    EXPECT_EQ(v["OMP_NUM_THREADS"], "1");
    EXPECT_EQ(v["threads"], "1");
    EXPECT_EQ(v["EXTRA_VARIABLE"], "extra value");
    if (rank == 0) {
      port = v["MASTER_PORT"];
      EXPECT_NE(v["ACC_STORE_LISTEN_FD"], "(unset)");
      EXPECT_NE(v["ACC_STORE_LISTEN_FD"], "1234");
      EXPECT_EQ(v["listening"], "1") << "rank 0 inherits a listening socket";
      EXPECT_EQ(v["listen_port"], port) << "on MASTER_PORT";
    } else {
      EXPECT_EQ(v["MASTER_PORT"], port);
      EXPECT_EQ(v["ACC_STORE_LISTEN_FD"], "(unset)") << "only rank 0 serves the store";
    }
  }
  EXPECT_GT(std::atoi(port.c_str()), 0);
}

TEST_F(FunctionLauncher, CalledTwiceRunsTwoJobs) {
  const fs::path dir = dir_;
  for (const std::string call : {"first", "second"}) {
    acc::launch(
        [dir, call] {
          acc::Accelerator accelerator(cpu_options());
          auto sum = acc::reduce(torch::tensor({1.0}), "sum");
          check(sum.item<double>() == 2.0, "sum of two ones");
          write_file(dir / (call + "_" + std::to_string(accelerator.process_index())),
                     "job=" + env_or("ACC_JOB_ID") + "\nport=" + env_or("MASTER_PORT") +
                         "\nsecret=" + env_or("ACC_STORE_SECRET") + "\n");
        },
        2);
  }
  auto first = read_fields(file("first_0")), second = read_fields(file("second_0"));
  EXPECT_EQ(read_fields(file("first_1"))["job"], first["job"]);
  EXPECT_EQ(read_fields(file("second_1"))["job"], second["job"]);
  EXPECT_EQ(read_fields(file("first_1"))["port"], first["port"]);
  EXPECT_EQ(read_fields(file("second_1"))["port"], second["port"]);
  EXPECT_NE(first["job"], second["job"]) << "each call is a job of its own";
  // ... with a store secret of its own (the reduce above went through the store's gate with it).
  EXPECT_EQ(first["secret"].size(), 64u) << first["secret"];
  EXPECT_EQ(read_fields(file("first_1"))["secret"], first["secret"]);
  EXPECT_EQ(read_fields(file("second_1"))["secret"], second["secret"]);
  EXPECT_NE(first["secret"], second["secret"]);
  EXPECT_TRUE(no_children_left());
}

// --- failures ---------------------------------------------------------------------------------

TEST_F(FunctionLauncher, RankThatThrowsIsNamedAndTheOthersAreStopped) {
  const fs::path dir = dir_;
  const auto started = Clock::now();
  try {
    acc::launch(
        [dir] {
          acc::Accelerator accelerator(cpu_options());
          const int rank = accelerator.process_index();
          if (rank == 0) {
            // Something the rank started: stopped with it.
            const pid_t helper = ::fork();
            if (helper == 0) {
              ::execlp("sleep", "sleep", "300", static_cast<char*>(nullptr));
              ::_exit(127);
            }
            publish(dir / "helper_pid", std::to_string(helper));
          }
          publish(dir / ("pid_" + std::to_string(rank)), std::to_string(::getpid()));
          if (rank == 1) {
            for (const char* name : {"pid_0", "pid_2", "helper_pid"}) wait_for(dir / name);
            throw std::runtime_error("boom");
          }
          // The others block in a collective that rank 1 never joins (its timeout is 120 s).
          acc::reduce(torch::tensor({1.0}), "sum");
        },
        3, acc::LaunchOptions().grace_period(seconds(2)));
    FAIL() << "acc::launch returned although rank 1 threw";
  } catch (const acc::LaunchError& e) {
    // The others were stopped, or failed first themselves when their collective broke (Gloo saw rank 1
    // go) and were reaped in the same wake-up: either way rank 1 is named, not one of them.
    const std::string what = e.what();
    EXPECT_TRUE(what == "acc::launch: rank 1 of 3 failed: threw \"boom\"; the other ranks were stopped" ||
                what == "acc::launch: rank 1 of 3 failed: threw \"boom\"; the other ranks failed after it" ||
                what ==
                    "acc::launch: rank 1 of 3 failed: threw \"boom\"; the other ranks failed after it or were stopped")
        << what;
    EXPECT_EQ(e.rank(), 1);
    EXPECT_EQ(e.exit_code(), 1);
    EXPECT_EQ(e.signal(), 0);
    EXPECT_EQ(e.rank_error(), "boom");
  }
  EXPECT_LT(Clock::now() - started, seconds(60)) << "stopped long before the collective's 120 s timeout";
  EXPECT_TRUE(no_children_left());
  for (int rank = 0; rank < 3; ++rank) EXPECT_TRUE(process_dead(pid_in(file("pid_" + std::to_string(rank)))));
  EXPECT_TRUE(dead_within(pid_in(file("helper_pid")), seconds(5))) << "what a rank started is stopped too";
}

TEST_F(FunctionLauncher, RankThatExitsIsNamedWithItsExitCode) {
  try {
    acc::launch(
        [] {
          if (std::string(std::getenv("RANK")) == "1") std::exit(3);
          ::sleep(60);  // stopped by the launcher once rank 1 has failed
        },
        2, acc::LaunchOptions().grace_period(seconds(1)));
    FAIL() << "acc::launch returned although rank 1 exited with 3";
  } catch (const acc::LaunchError& e) {
    EXPECT_EQ(std::string(e.what()),
              "acc::launch: rank 1 of 2 failed: exited with code 3; the other ranks were stopped");
    EXPECT_EQ(e.rank(), 1);
    EXPECT_EQ(e.exit_code(), 3);
    EXPECT_EQ(e.rank_error(), "");
  }
  EXPECT_TRUE(no_children_left());
}

TEST_F(FunctionLauncher, RankThatReturnedBeforeAPeerFailedIsNamedToo) {
  try {
    acc::launch(
        [] {
          acc::Accelerator accelerator(cpu_options().timeout(seconds(20)));
          if (accelerator.process_index() == 0) return;  // leaves the job early
          std::this_thread::sleep_for(milliseconds(300));
          acc::reduce(torch::tensor({1.0}), "sum");  // rank 0 is gone: fails
        },
        2);
    FAIL() << "acc::launch returned although rank 1's collective had no peer";
  } catch (const acc::LaunchError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.rank(), 1) << what;
    EXPECT_NE(what.find("; rank 0 had already returned, "), std::string::npos) << what;
    EXPECT_NE(what.find(" s before (a rank that returns while the others still run collectives makes them fail: it "
                        "may have left early)"),
              std::string::npos)
        << what;
  }
  EXPECT_TRUE(no_children_left());
}

TEST_F(FunctionLauncher, RankKilledBySignalIsNamedWithTheSignal) {
  try {
    acc::launch([] { ::raise(SIGKILL); }, 1);
    FAIL() << "acc::launch returned although its rank was killed";
  } catch (const acc::LaunchError& e) {
    EXPECT_EQ(std::string(e.what()), "acc::launch: rank 0 of 1 failed: was killed by signal 9 (SIGKILL)");
    EXPECT_EQ(e.rank(), 0);
    EXPECT_EQ(e.exit_code(), -1);
    EXPECT_EQ(e.signal(), SIGKILL);
  }
  EXPECT_TRUE(no_children_left());
}

TEST_F(FunctionLauncher, RankThatIgnoresSigtermIsKilledAfterTheGracePeriod) {
  const fs::path dir = dir_;
  const auto started = Clock::now();
  try {
    acc::launch(
        [dir] {
          if (env_or("RANK") == "0") {
            ::signal(SIGTERM, SIG_IGN);
            publish(dir / "pid_0", std::to_string(::getpid()));
            ::sleep(60);
          }
          wait_for(dir / "pid_0");
          throw std::runtime_error("rank 1 fails");
        },
        2, acc::LaunchOptions().grace_period(milliseconds(500)));
    FAIL() << "acc::launch returned although rank 1 threw";
  } catch (const acc::LaunchError& e) {
    EXPECT_EQ(e.rank(), 1);
    EXPECT_EQ(e.rank_error(), "rank 1 fails");
  }
  const auto elapsed = Clock::now() - started;
  EXPECT_GE(elapsed, milliseconds(500)) << "rank 0 got its grace period";
  EXPECT_LT(elapsed, seconds(20)) << "and was killed after it";
  EXPECT_TRUE(no_children_left());
  EXPECT_TRUE(process_dead(pid_in(file("pid_0"))));
}

TEST_F(FunctionLauncher, DeadlineStopsTheRanks) {
  const auto started = Clock::now();
  const std::string error = acc::testing::error_text<acc::LaunchError>([] {
    acc::launch([] { ::sleep(60); }, 2, acc::LaunchOptions().timeout(seconds(1)).grace_period(milliseconds(500)));
  });
  EXPECT_EQ(
      error,
      "acc::launch: the ranks did not finish within 1 s (LaunchOptions::timeout); the 2 still running were stopped");
  EXPECT_LT(Clock::now() - started, seconds(20));
  EXPECT_TRUE(no_children_left());
}

TEST_F(FunctionLauncher, TorchErrorsArriveWithoutTheirBacktrace) {
  try {
    acc::launch([] { (void)torch::ones({2, 3}).matmul(torch::ones({2, 3})); }, 1);
    FAIL() << "a shape mismatch in matmul must throw";
  } catch (const acc::LaunchError& e) {
    EXPECT_NE(e.rank_error().find("cannot be multiplied"), std::string::npos) << e.rank_error();
    EXPECT_EQ(e.rank_error().find("frame #"), std::string::npos) << "no C++ backtrace:\n" << e.rank_error();
    EXPECT_EQ(e.rank_error().find("Exception raised from"), std::string::npos) << e.rank_error();
  }
}

// --- calls refused before anything starts -----------------------------------------------------

TEST_F(FunctionLauncher, BadArgumentsAreRefusedWithTheFix) {
  using acc::testing::error_text;
  auto nothing = [] {};
  EXPECT_EQ(error_text<acc::ConfigError>([&] { acc::launch(nothing, 0); }),
            "acc::launch: num_processes is 0; it must be at least 1 (the number of ranks to start on this machine)");
  EXPECT_EQ(error_text<acc::ConfigError>([&] { acc::launch(nothing, -2); }),
            "acc::launch: num_processes is -2; it must be at least 1 (the number of ranks to start on this machine)");
  EXPECT_EQ(error_text<acc::ConfigError>([&] { acc::launch(std::function<void()>(), 2); }),
            "acc::launch: the function to run is empty; pass a callable");
  EXPECT_EQ(error_text<acc::ConfigError>([&] { acc::launch(nothing, 2, acc::LaunchOptions().master_port(70000)); }),
            "acc::launch: master_port 70000 is not a TCP port; use 1-65535, or 0 (the default) for a free one");
  EXPECT_EQ(error_text<acc::ConfigError>([&] {
              acc::launch(nothing, 2, acc::LaunchOptions().env({{"MASTER_PORT", "1"}}));
            }),
            "acc::launch: LaunchOptions::env sets MASTER_PORT, which acc::launch sets for every rank itself (set "
            "LaunchOptions::master_port instead); remove it from env");
  EXPECT_EQ(error_text<acc::ConfigError>([&] {
              acc::launch(nothing, 2, acc::LaunchOptions().env({{"RANK", "1"}}));
            }),
            "acc::launch: LaunchOptions::env sets RANK, which acc::launch sets for every rank itself (each rank gets "
            "its own); remove it from env");
  EXPECT_EQ(error_text<acc::ConfigError>(
                [&] { acc::launch(nothing, 2, acc::LaunchOptions().num_cpu_threads_per_process(0)); }),
            "acc::launch: num_cpu_threads_per_process is 0; use 1 or more, or leave it unset for the default");
  EXPECT_EQ(error_text<acc::ConfigError>([&] { acc::launch(nothing, 2, acc::LaunchOptions().timeout(seconds(0))); }),
            "acc::launch: timeout must be positive; leave it unset for no deadline");
  EXPECT_EQ(error_text<acc::ConfigError>([&] {
              acc::launch(nothing, 2, acc::LaunchOptions().master_addr("no-such-host.invalid"));
            }).rfind("acc::launch: master_addr 'no-such-host.invalid' does not resolve; use 127.0.0.1", 0),
            0u);
  EXPECT_TRUE(no_children_left()) << "nothing was started";
}

TEST_F(FunctionLauncher, PortInUseIsRefusedNamingTheOption) {
  // Hold a port, then ask for it.
  const int holder = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(holder, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(holder, 1), 0);
  socklen_t length = sizeof(address);
  ::getsockname(holder, reinterpret_cast<sockaddr*>(&address), &length);
  const int port = ntohs(address.sin_port);
  const std::string error =
      acc::testing::error_text<acc::Error>([&] { acc::launch([] {}, 2, acc::LaunchOptions().master_port(port)); });
  ::close(holder);
  EXPECT_NE(error.find(std::to_string(port)), std::string::npos) << error;
  EXPECT_NE(error.find("master_port"), std::string::npos) << error;
  EXPECT_TRUE(no_children_left());
}

TEST_F(FunctionLauncher, NestedCallIsRefusedInsideTheRank) {
  const fs::path dir = dir_;
  acc::launch(
      [dir] { write_file(dir / "nested", acc::testing::error_text<acc::ConfigError>([] { acc::launch([] {}, 2); })); },
      1);
  EXPECT_EQ(read_file(file("nested")),
            "acc::launch: called from inside a rank of acc::launch; a rank cannot start ranks of its own. Call "
            "acc::launch once, from the program's own process, and work across the ranks inside the function with "
            "collectives");
}

TEST_F(FunctionLauncher, AcceleratorInTheCallerIsRefused) {
  // Runs in a helper: the state is process-wide.
  const int code = run_isolated([] {
    acc::PartialState state(acc::AcceleratorOptions().cpu(true).environment(acc::testing::fake_env({})));
    const std::string error = acc::testing::error_text<acc::ConfigError>([] { acc::launch([] {}, 2); });
    if (error.rfind("acc::launch: an acc::Accelerator or acc::PartialState was created in this process", 0) != 0) {
      std::cerr << "unexpected: " << error << "\n";
      return 1;
    }
    acc::PartialState::destroy();
    acc::launch([] {}, 1);  // the documented fix works
    return 0;
  });
  EXPECT_EQ(code, 0);
}

// --- fork safety --------------------------------------------------------------------------------

// GNU OpenMP's pool does not survive fork (the experiment in function_launcher.h): after the caller
// ran a parallel op, ranks get 1 thread and finish; asking for more is refused instead of hanging.
TEST_F(FunctionLauncher, RanksFinishAfterTheCallerRanParallelTorchOps) {
  const fs::path dir = dir_;
  const int code = run_isolated([dir] {
    at::set_num_threads(2);
    auto a = torch::rand({1024, 1024});
    (void)(a.matmul(a).exp() * 2).sum().item<double>();  // starts the OpenMP pool
    acc::launch(
        [dir] {
          auto b = torch::rand({1024, 1024});
          (void)(b.matmul(b).exp() * 2).sum().item<double>();
          write_file(dir / ("threads_" + env_or("RANK")), std::to_string(at::get_num_threads()));
        },
        2, acc::LaunchOptions().timeout(seconds(60)));
    const std::string error = acc::testing::error_text<acc::ConfigError>(
        [] { acc::launch([] {}, 2, acc::LaunchOptions().num_cpu_threads_per_process(2)); });
    if (error.rfind("acc::launch: num_cpu_threads_per_process(2) cannot be honoured: this process already runs ", 0) !=
        0) {
      std::cerr << "unexpected: " << error << "\n";
      return 1;
    }
    return 0;
  });
  EXPECT_EQ(code, 0);
  EXPECT_EQ(read_file(file("threads_0")), "1");
  EXPECT_EQ(read_file(file("threads_1")), "1");
}

TEST_F(FunctionLauncher, FreshCallerMayGiveRanksSeveralThreads) {
  const fs::path dir = dir_;
  acc::launch([dir] { write_file(dir / ("threads_" + env_or("RANK")), std::to_string(at::get_num_threads())); }, 2,
              acc::LaunchOptions().num_cpu_threads_per_process(2));
  EXPECT_EQ(read_file(file("threads_0")), "2") << "this test process runs one thread, so 2 threads are safe";
  EXPECT_EQ(read_file(file("threads_1")), "2");
}

// --- the caller's signals and death -------------------------------------------------------------

std::atomic<int> sigints{0};
extern "C" void count_sigint(int) { sigints.fetch_add(1); }

TEST_F(FunctionLauncher, SigintStopsTheRanksThenReachesTheProgram) {
  const fs::path dir = dir_;
  const int code = run_isolated([dir] {
    // A program with a SIGINT handler of its own (a REPL's) survives Ctrl-C.
    struct sigaction action {};
    action.sa_handler = count_sigint;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, nullptr);
    const auto started = Clock::now();
    try {
      acc::launch(
          [dir] {
            publish(dir / ("pid_" + env_or("RANK")), std::to_string(::getpid()));
            if (env_or("RANK") == "0") {
              wait_for(dir / "pid_1");
              ::kill(::getppid(), SIGINT);  // Ctrl-C in the caller
            }
            ::sleep(60);
          },
          2, acc::LaunchOptions().grace_period(seconds(1)));
      std::cerr << "acc::launch returned after SIGINT\n";
      return 1;
    } catch (const acc::LaunchError& e) {
      if (std::string(e.what()) != "acc::launch: interrupted (SIGINT); the ranks were stopped") {
        std::cerr << "unexpected: " << e.what() << "\n";
        return 2;
      }
    }
    if (sigints.load() != 1) return 3;  // the program's own handler ran once, after the ranks ended
    if (Clock::now() - started > seconds(20)) return 4;
    if (!no_children_left()) return 5;
    return 0;
  });
  EXPECT_EQ(code, 0) << "1: no error, 2: wrong error, 3: the program's handler did not run once, 4: too slow, 5: "
                        "a child left";
  EXPECT_TRUE(process_dead(pid_in(file("pid_0"))));
  EXPECT_TRUE(process_dead(pid_in(file("pid_1"))));
}

TEST_F(FunctionLauncher, RanksDieWithTheirCaller) {
  const fs::path dir = dir_;
  // Orphaned ranks are re-parented to this process, which can then see them end.
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  const pid_t caller = ::fork();
  if (caller == 0) {
    ::alarm(120);
    try {
      acc::launch(
          [dir] {
            publish(dir / ("pid_" + env_or("RANK")), std::to_string(::getpid()));
            ::sleep(120);
          },
          2);
    } catch (...) {
    }
    ::_exit(0);
  }
  const auto until = Clock::now() + seconds(60);
  while (!(fs::exists(file("pid_0")) && fs::exists(file("pid_1"))) && Clock::now() < until)
    std::this_thread::sleep_for(milliseconds(20));
  ASSERT_TRUE(fs::exists(file("pid_0")) && fs::exists(file("pid_1")));
  ::kill(caller, SIGKILL);
  ::waitpid(caller, nullptr, 0);
  for (const char* name : {"pid_0", "pid_1"}) {
    const pid_t rank = pid_in(file(name));
    int status = 0;
    // Blocks until the orphan ends: PR_SET_PDEATHSIG kills it at once; ctest's timeout catches a hang.
    ASSERT_EQ(::waitpid(rank, &status, 0), rank) << name;
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << name;
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
}

}  // namespace

// A stand-in for a training program, driven by its arguments, for the launcher's tests. Commands run
// in order; "@R:command" runs only on rank R.
//   say TEXT | err TEXT      print a line on stdout | stderr (flushed)
//   env NAME                 print NAME=<value> (or NAME unset)
//   exit CODE | kill SIGNAL  end now
//   sleep SECONDS            sleep (EINTR-safe: a handled signal does not shorten the test's timeline)
//   ignore-term              ignore SIGTERM (a rank that needs SIGKILL)
//   trap DIR                 on SIGINT/SIGTERM write DIR/rank_R.signal with the signal's name, exit 0
//   pidfile DIR              write DIR/rank_R.pid
//   session                  print SESSION_LEADER=yes when this process leads a session of its own
//   fail-first-attempt CODE  exit CODE when TORCHELASTIC_RESTART_COUNT is 0
//   rendezvous               rank 0 listens on MASTER_ADDR:MASTER_PORT, the others connect and send their
//                            rank; rank 0 prints the ranks it met (the static rendezvous the runtime uses)
#include <arpa/inet.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#ifdef FAKE_RANK_LINKS_ACC
// Built a second time against the stand-in libacc.so (CMakeLists.txt), so that acc-launch takes it for an
// acc program (program_links_acc.h) and judges its launch as the runtime would.
int acc_fake_library_symbol();
#endif

namespace {

std::string g_trap_dir;
int g_rank = 0;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

void on_signal(int sig) {
  std::ofstream(g_trap_dir + "/rank_" + std::to_string(g_rank) + ".signal") << (sig == SIGINT ? "SIGINT" : "SIGTERM");
  _exit(0);
}

void sleep_for(double seconds) {
  std::this_thread::sleep_until(std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds));
}

sockaddr_in master_address() {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(std::atoi(env("MASTER_PORT").c_str())));
  inet_pton(AF_INET, env("MASTER_ADDR").c_str(), &address.sin_addr);
  return address;
}

int rendezvous() {
  const int world = std::atoi(env("WORLD_SIZE").c_str());
  sockaddr_in address = master_address();
  if (g_rank == 0) {
    const int server = socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    setsockopt(server, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(server, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 || listen(server, 64) != 0) {
      std::fprintf(stderr, "rank 0 cannot listen: %s\n", std::strerror(errno));
      return 1;
    }
    std::set<int> met;
    while (static_cast<int>(met.size()) < world - 1) {
      const int peer = accept(server, nullptr, nullptr);
      int rank = -1;
      if (peer >= 0 && read(peer, &rank, sizeof(rank)) == sizeof(rank)) met.insert(rank);
      close(peer);
    }
    std::string list;
    for (int r : met) list += " " + std::to_string(r);
    std::printf("rendezvous complete, met ranks:%s\n", list.c_str());
    std::fflush(stdout);
    return 0;
  }
  // Rank 0 may not listen yet: retry, as a TCPStore client does.
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
      (void)!write(fd, &g_rank, sizeof(g_rank));
      close(fd);
      return 0;
    }
    close(fd);
    sleep_for(0.05);
  }
  std::fprintf(stderr, "rank %d could not reach rank 0\n", g_rank);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
#ifdef FAKE_RANK_LINKS_ACC
  if (acc_fake_library_symbol() != 1) return 98;
#endif
  g_rank = std::atoi(env("RANK").c_str());
  for (int i = 1; i < argc; ++i) {
    std::string command = argv[i];
    if (command.size() > 1 && command[0] == '@') {
      const size_t colon = command.find(':');
      const int only = std::atoi(command.substr(1, colon - 1).c_str());
      command = command.substr(colon + 1);
      if (only != g_rank) {
        if (command != "ignore-term" && command != "rendezvous" && command != "session") ++i;  // skip the argument too
        continue;
      }
    }
    if (command == "say") {
      std::printf("%s\n", argv[++i]);
      std::fflush(stdout);
    } else if (command == "err") {
      std::fprintf(stderr, "%s\n", argv[++i]);
    } else if (command == "env") {
      const char* v = std::getenv(argv[++i]);
      std::printf("%s=%s\n", argv[i], v ? v : "<unset>");
      std::fflush(stdout);
    } else if (command == "session") {
      std::printf("SESSION_LEADER=%s\n", ::getsid(0) == ::getpid() ? "yes" : "no");
      std::fflush(stdout);
    } else if (command == "exit") {
      return std::atoi(argv[++i]);
    } else if (command == "kill") {
      raise(std::atoi(argv[++i]));
    } else if (command == "sleep") {
      sleep_for(std::atof(argv[++i]));
    } else if (command == "ignore-term") {
      signal(SIGTERM, SIG_IGN);
    } else if (command == "trap") {
      g_trap_dir = argv[++i];
      signal(SIGINT, on_signal);
      signal(SIGTERM, on_signal);
    } else if (command == "pidfile") {
      std::ofstream(std::string(argv[++i]) + "/rank_" + std::to_string(g_rank) + ".pid") << getpid();
    } else if (command == "fail-first-attempt") {
      const int code = std::atoi(argv[++i]);
      if (env("TORCHELASTIC_RESTART_COUNT") == "0") return code;
    } else if (command == "rendezvous") {
      if (int rc = rendezvous()) return rc;
    } else {
      std::fprintf(stderr, "fake_rank: unknown command %s\n", command.c_str());
      return 99;
    }
  }
  return 0;
}

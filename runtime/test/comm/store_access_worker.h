#pragma once
// The processes of the StoreAccess tests (issue 35, item 3), run by acc_rendezvous_worker:
//   - a rank that holds after joining, so the test can look at its sockets: it announces its pid in
//     the test's directory (ACC_TEST_DIR) and waits there until the test has probed;
//   - the probe: another local process without the secret, which tries c10d's TCPStore client at
//     each port it is given;
//   - the rogue: another local process that watches for new listeners of the test's processes and
//     writes acc/job=rogue through every one that takes a TCPStore client.
// c10d's client waits without a deadline of its own on a peer that accepts and never answers (a
// Gloo listener, a gate), so every client runs on a thread of its own that is abandoned when its
// time is up, and the intruders end with _exit.
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "store_access_sockets.h"

namespace acc::testing::store_access {

inline const char* const kJobKey = "acc/job";

inline bool file_exists(const std::string& path) { return std::ifstream(path).good(); }

/// Tells the test this rank has joined (its pid in ACC_TEST_DIR/rank.<rank>), then waits until the
/// test has probed (ACC_TEST_DIR/probed) or `limit` passes. Without ACC_TEST_DIR, returns at once.
inline void announce_and_hold(int rank, std::chrono::milliseconds limit) {
  const char* dir = std::getenv("ACC_TEST_DIR");
  if (dir == nullptr) return;
  const std::string path = std::string(dir) + "/rank." + std::to_string(rank);
  std::ofstream(path + ".tmp") << ::getpid() << "\n";
  std::rename((path + ".tmp").c_str(), path.c_str());  // the test never reads half a file
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!file_exists(std::string(dir) + "/probed") && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

/// Ranks >= 1 say they are done (ACC_TEST_DIR/left.<rank>) and return; rank 0 waits until all have,
/// or `limit` passes (then false).
inline bool leave_in_order(int rank, int world_size, std::chrono::milliseconds limit) {
  const char* dir = std::getenv("ACC_TEST_DIR");
  if (dir == nullptr) return true;
  const auto left = [&](int r) { return std::string(dir) + "/left." + std::to_string(r); };
  if (rank != 0) {
    std::ofstream(left(rank)) << "\n";
    return true;
  }
  const auto until = std::chrono::steady_clock::now() + limit;
  for (int r = 1; r < world_size; ++r) {
    while (!file_exists(left(r))) {
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return true;
}

/// The job id as this rank reads it now, below every prefix of `store` (acc/job is not under the
/// attempt's prefix).
inline std::string job_as_read(c10d::Store& top) {
  c10d::Store* store = &top;
  c10::intrusive_ptr<c10d::Store> below;
  while (auto* prefixed = dynamic_cast<c10d::PrefixStore*>(store)) {
    below = prefixed->getUnderlyingStore();
    store = below.get();
  }
  const auto bytes = store->get(kJobKey);
  return std::string(bytes.begin(), bytes.end());
}

inline std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

inline c10::intrusive_ptr<c10d::TCPStore> store_client(int port, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = false;
  options.waitWorkers = false;
  options.timeout = timeout;
  return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
}

/// `probe TIMEOUT_MS PORT...`: for each port, a TCPStore client that reads acc/job and then
/// writes it. Prints one line per port: "PROBE <port>: read '<id>'; wrote 'intruder'", or what
/// stopped it.
inline int probe_main(const std::vector<int>& ports, std::chrono::milliseconds timeout) {
  struct Results {
    std::mutex mutex;
    std::map<int, std::string> by_port;
  };
  auto results = std::make_shared<Results>();
  for (int port : ports) {
    std::thread([results, port, timeout] {
      std::string outcome;
      try {
        auto client = store_client(port, timeout);
        const auto bytes = client->get(kJobKey);
        outcome = "read '" + std::string(bytes.begin(), bytes.end()) + "'";
        client->set(kJobKey, std::vector<uint8_t>{'i', 'n', 't', 'r', 'u', 'd', 'e', 'r'});
        client->get(kJobKey);  // a set has no answer in c10d's protocol: a read proves it landed
        outcome += "; wrote 'intruder'";
      } catch (const std::exception& e) {
        outcome += (outcome.empty() ? "" : "; then ") + std::string("refused: ") + first_line(e.what());
      }
      const std::lock_guard<std::mutex> lock(results->mutex);
      results->by_port[port] = outcome;
    }).detach();
  }
  const auto until = std::chrono::steady_clock::now() + timeout * 2 + std::chrono::seconds(1);
  for (;;) {
    {
      const std::lock_guard<std::mutex> lock(results->mutex);
      if (results->by_port.size() == ports.size() || std::chrono::steady_clock::now() >= until) {
        for (int port : ports) {
          const auto it = results->by_port.find(port);
          std::cout << "PROBE " << port << ": "
                    << (it == results->by_port.end() ? "no answer within " + std::to_string(timeout.count() * 2) + " ms"
                                                     : it->second)
                    << "\n";
        }
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::cout.flush();
  ::_exit(0);  // clients may still wait on silent peers
}

/// `rogue LIMIT_MS ROOT_PID DIR`: until DIR/stop exists or LIMIT_MS pass, looks every few
/// milliseconds for TCP listeners of the processes under ROOT_PID (not itself) and, through each new
/// one that takes a TCPStore client, writes acc/job=rogue again and again while it lasts. Writes
/// DIR/rogue.ready once it watches. Prints "ROGUE <port> (pid <pid>): <outcome>" per listener,
/// then "ROGUE tried <n> listeners, <k> took writes".
inline int rogue_main(pid_t root, const std::string& dir, std::chrono::milliseconds limit) {
  struct Attempt {
    int port = 0;
    pid_t owner = 0;
    std::string outcome = "no answer";
    long writes = 0;
  };
  struct Shared {
    std::mutex mutex;
    std::map<unsigned long, Attempt> by_inode;
    std::atomic<bool> stop{false};
  };
  auto shared = std::make_shared<Shared>();
  std::ofstream(dir + "/rogue.ready") << ::getpid() << "\n";
  const auto until = std::chrono::steady_clock::now() + limit;
  const pid_t self = ::getpid();
  while (!file_exists(dir + "/stop") && std::chrono::steady_clock::now() < until) {
    for (pid_t pid : descendants(root)) {
      if (pid == self) continue;
      for (const Listener& listener : listening_sockets(pid)) {
        {
          const std::lock_guard<std::mutex> lock(shared->mutex);
          if (shared->by_inode.count(listener.inode) != 0) continue;
          shared->by_inode[listener.inode] = Attempt{listener.port, pid};
        }
        const unsigned long inode = listener.inode;
        const int port = listener.port;
        std::thread([shared, inode, port] {
          const std::vector<uint8_t> rogue{'r', 'o', 'g', 'u', 'e'};
          long writes = 0;
          std::string outcome;
          try {
            auto client = store_client(port, std::chrono::milliseconds(1000));
            while (!shared->stop) {
              client->set(kJobKey, rogue);
              if (++writes % 50 == 1) {
                client->get(kJobKey);  // a set has no answer: a read proves the writes land
                const std::lock_guard<std::mutex> lock(shared->mutex);
                shared->by_inode[inode].writes = writes;
                shared->by_inode[inode].outcome = "took writes";
              }
              std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
            outcome = "took writes until the end";
          } catch (const std::exception& e) {
            outcome = std::string(writes > 0 ? "took writes, then " : "") + "refused: " + first_line(e.what());
          }
          const std::lock_guard<std::mutex> lock(shared->mutex);
          shared->by_inode[inode].outcome = outcome;  // its writes: those a later read proved
        }).detach();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  shared->stop = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // clients see the stop
  const std::lock_guard<std::mutex> lock(shared->mutex);
  int took = 0;
  for (const auto& [inode, attempt] : shared->by_inode) {
    std::cout << "ROGUE " << attempt.port << " (pid " << attempt.owner << "): " << attempt.outcome << ", "
              << attempt.writes << " writes read back\n";
    if (attempt.writes > 0) ++took;
  }
  std::cout << "ROGUE tried " << shared->by_inode.size() << " listeners, " << took << " took writes" << std::endl;
  ::_exit(0);
}

}  // namespace acc::testing::store_access

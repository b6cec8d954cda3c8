// Store calls of a job with a secret (rank 0's gate serving acc's protocol, comm/gate/store_gate.h) against
// c10d's TCPStore on loopback, the store of a job without one, in the same run. Each round times a
// set and a get of its own key on every store, the stores taking turns so that machine noise hits
// them alike; it prints the median microseconds per call and the ratio to TCPStore's (below 1.0:
// faster). What the secret costs a rendezvous, Gloo's connection setup and NCCL's id exchange.
//
// Usage: acc_bench_store [rounds] [value_bytes]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/acc_store.h"
#include "comm/gate/store_client.h"
#include "comm/gate/store_gate.h"
#include "timing.h"

namespace {

using acc::bench::median;
using acc::bench::time_ms;
using namespace acc::detail;

// A bound, listening loopback socket for the gate (as acc-launch hands rank 0 one).
int listening_socket() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(fd, SOMAXCONN) != 0) {
    std::perror("listen");
    std::exit(1);
  }
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 2000;
  const std::size_t value_bytes = argc > 2 ? static_cast<std::size_t>(std::atol(argv[2])) : 64;
  const auto timeout = std::chrono::milliseconds(30000);

  c10d::TCPStoreOptions server_options;
  server_options.port = 0;
  server_options.isServer = true;
  server_options.waitWorkers = false;
  server_options.timeout = timeout;
  auto server = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", server_options);
  c10d::TCPStoreOptions client_options = server_options;
  client_options.port = server->getPort();
  client_options.isServer = false;
  auto tcp_client = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", client_options);

  const std::string secret = new_store_secret();
  auto gate = std::make_shared<StoreGate>(listening_socket(), secret);
  auto remote_open = std::make_shared<const AccStore::Opener>(
      [port = gate->port(), secret] { return StoreConnection::connect("127.0.0.1", port, secret, {}); });
  auto local_open = std::make_shared<const AccStore::Opener>([gate] { return StoreConnection(gate->adopt_local()); });
  auto acc_remote = c10::make_intrusive<AccStore>(remote_open, timeout);
  auto acc_local = c10::make_intrusive<AccStore>(local_open, timeout);

  struct Subject {
    const char* name;
    c10::intrusive_ptr<c10d::Store> store;
    std::vector<double> us;
  };
  std::vector<Subject> subjects{{"c10d TCPStore client (no secret)", tcp_client, {}},
                                {"AccStore, another rank (TCP, secret)", acc_remote, {}},
                                {"AccStore, rank 0 (socketpair, secret)", acc_local, {}}};
  const std::vector<uint8_t> value(value_bytes, 7);
  for (int round = -100; round < rounds; ++round) {  // 100 rounds of warm-up
    for (std::size_t s = 0; s < subjects.size(); ++s) {
      const std::string key = "bench/" + std::to_string(s) + "/" + std::to_string(round);
      const double ms = time_ms([&] {
        subjects[s].store->set(key, value);
        if (subjects[s].store->get(key).size() != value_bytes) std::exit(1);
      });
      if (round >= 0) subjects[s].us.push_back(ms * 1000.0 / 2);
    }
  }
  const double baseline = median(subjects[0].us);
  std::printf("store calls (set, then get of the same key), %d rounds, %zu-byte values, median per call:\n", rounds,
              value_bytes);
  for (const Subject& s : subjects) {
    std::printf("  %-40s %8.1f us  %.2fx TCPStore's\n", s.name, median(s.us), median(s.us) / baseline);
  }
  return 0;
}

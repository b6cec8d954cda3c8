// The store gate and relay (runtime/src/comm/store_gate.h) on loopback: a stand-in TCPStore server
// behind a gate, clients through a relay, and the peers a gate or a relay must refuse.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <iostream>

#include <acc/errors.h>
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/gate_handshake.h"
#include "comm/store_gate.h"
#include "loopback_peers.h"

namespace {

using namespace std::chrono_literals;
using acc::detail::GateOptions;
using acc::detail::RelayOptions;
using acc::detail::StoreGate;
using acc::detail::StoreRelay;
using acc::testing::connect_loopback;
using acc::testing::End;
using acc::testing::Fd;
using acc::testing::listen_on;
using acc::testing::random_payload;
using acc::testing::recv_exactly;
using acc::testing::recv_until_end;
using acc::testing::round_trip;
using acc::testing::send_all;
using acc::testing::Upstream;
using Clock = std::chrono::steady_clock;
namespace gp = acc::detail::gate_protocol;

const std::string kSecret = acc::detail::new_store_secret();

// Messages a hook received, from whichever thread.
struct Messages {
  std::mutex mutex;
  std::vector<std::string> texts;
  std::function<void(const std::string&)> hook() {
    return [this](const std::string& text) {
      const std::lock_guard<std::mutex> lock(mutex);
      texts.push_back(text);
    };
  }
  std::vector<std::string> get() {
    const std::lock_guard<std::mutex> lock(mutex);
    return texts;
  }
};

std::unique_ptr<StoreGate> make_gate(const Upstream& upstream, const std::string& secret = kSecret,
                                     GateOptions options = {}, int backlog = 128) {
  return std::make_unique<StoreGate>(listen_on(0, backlog).release(), "127.0.0.1", upstream.port(), secret,
                                     std::move(options));
}

// Polls `condition` until it holds or `timeout` passes.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout = 5s) {
  const auto until = Clock::now() + timeout;
  while (!condition()) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Entries of a /proc directory: /proc/self/fd (descriptors), /proc/self/task (threads).
int entries(const char* dir) {
  int n = 0;
  if (DIR* d = opendir(dir)) {
    while (const dirent* entry = readdir(d)) n += entry->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

// --- carrying the store's bytes -------------------------------------------------------------------

TEST(StoreGate, LargePayloadRoundTripsThroughRelayAndGate) {
  Upstream upstream;
  auto gate = make_gate(upstream);
  StoreRelay relay("127.0.0.1", gate->port(), kSecret);

  const std::string payload = random_payload(8 << 20, 1);
  const auto received = round_trip(relay.port(), payload);
  EXPECT_EQ(received.end, End::kEof);
  ASSERT_EQ(received.bytes.size(), payload.size());
  EXPECT_TRUE(received.bytes == payload) << "8 MiB came back changed";
  EXPECT_EQ(relay.wait_for_handshake(0ms), std::nullopt);
  EXPECT_EQ(relay.failure(), std::nullopt);
  EXPECT_EQ(gate->admitted(), 1U);
  EXPECT_EQ(gate->refused(), 0U);
  EXPECT_EQ(upstream.accepted(), 1);
}

TEST(StoreGate, SixteenConcurrentConnections) {
  Upstream upstream;
  auto gate = make_gate(upstream);
  StoreRelay relay("127.0.0.1", gate->port(), kSecret);

  constexpr int kConnections = 16;
  std::vector<std::string> payloads, received(kConnections);
  std::vector<End> ends(kConnections, End::kError);
  for (int i = 0; i < kConnections; ++i) payloads.push_back(random_payload((256 << 10) + 1000 * i, 100 + i));
  std::vector<std::thread> clients;
  for (int i = 0; i < kConnections; ++i) {
    clients.emplace_back([&, i] {
      auto result = round_trip(relay.port(), payloads[i]);
      received[i] = std::move(result.bytes);
      ends[i] = result.end;
    });
  }
  for (auto& client : clients) client.join();
  for (int i = 0; i < kConnections; ++i) {
    EXPECT_EQ(ends[i], End::kEof) << "connection " << i;
    EXPECT_TRUE(received[i] == payloads[i]) << "connection " << i << " got " << received[i].size() << " of "
                                            << payloads[i].size() << " bytes, or other bytes";
  }
  EXPECT_EQ(gate->admitted(), static_cast<uint64_t>(kConnections));
  EXPECT_EQ(upstream.accepted(), kConnections);
  // Both ends closed every connection once both directions ended.
  EXPECT_TRUE(eventually([&] { return relay.connections() == 0 && gate->connections() == 0; }))
      << relay.connections() << " relay and " << gate->connections() << " gate connections left open";
}

TEST(StoreGate, HalfClosePropagatesBothWays) {
  // The upstream answers only after it has seen the client's shutdown(SHUT_WR); the client reads
  // the answer on its still-open half, then the upstream's own end of stream.
  Upstream upstream(Upstream::Mode::kCountThenReply);
  auto gate = make_gate(upstream);
  StoreRelay relay("127.0.0.1", gate->port(), kSecret);

  Fd client = connect_loopback(relay.port());
  ASSERT_TRUE(send_all(client.get(), random_payload(100000, 2)));
  ASSERT_EQ(shutdown(client.get(), SHUT_WR), 0);
  const auto received = recv_until_end(client.get());
  EXPECT_EQ(received.bytes, "got 100000");
  EXPECT_EQ(received.end, End::kEof);
  EXPECT_TRUE(eventually([&] { return relay.connections() == 0 && gate->connections() == 0; }));
}

// --- refusing ----------------------------------------------------------------------------------------

TEST(StoreGate, WrongSecretIsReportedByTheRelayAndNeverReachesTheStore) {
  Upstream upstream;
  Messages refusals;
  GateOptions options;
  options.on_refused = refusals.hook();
  auto gate = make_gate(upstream, kSecret, options);
  StoreRelay relay("127.0.0.1", gate->port(), acc::detail::new_store_secret());

  for (int attempt = 0; attempt < 2; ++attempt) {
    Fd client = connect_loopback(relay.port());
    send_all(client.get(), "a store request");
    const auto received = recv_until_end(client.get());
    EXPECT_TRUE(received.bytes.empty());
    EXPECT_TRUE(received.end == End::kEof || received.end == End::kReset) << static_cast<int>(received.end);
    // Recorded before the relay closed the client's connection: no waiting needed.
    const auto failure = relay.failure();
    ASSERT_TRUE(failure.has_value()) << "attempt " << attempt;
    EXPECT_TRUE(contains(*failure, "rank 0's store at 127.0.0.1:" + std::to_string(gate->port()) +
                                       " refused this rank's ACC_STORE_SECRET"))
        << *failure;
    EXPECT_EQ(relay.wait_for_handshake(0ms), failure);
  }
  EXPECT_TRUE(eventually([&] { return gate->refused() == 2; })) << gate->refused();
  EXPECT_EQ(gate->admitted(), 0U);
  EXPECT_EQ(upstream.accepted(), 0) << "a client with the wrong secret reached the store";
  const auto reported = refusals.get();
  ASSERT_EQ(reported.size(), 1U) << "the first refusal only is reported";
  EXPECT_TRUE(contains(reported[0], "refused a connection from 127.0.0.1:")) << reported[0];
  EXPECT_TRUE(contains(reported[0], "does not match this job's store secret")) << reported[0];
}

TEST(StoreGate, GateDropsGarbageAndSilenceWhileServingOthers) {
  Upstream upstream;
  GateOptions options;
  options.handshake_timeout = 1500ms;
  auto gate = make_gate(upstream, kSecret, options);
  StoreRelay relay("127.0.0.1", gate->port(), kSecret);

  // A TCPStore client speaking first (a query byte and c10d's validation magic), then waiting.
  const auto start = Clock::now();
  Fd store_client = connect_loopback(gate->port());
  send_all(store_client.get(), std::string("\x00\xce\xf7\x85\x3c", 5));
  // Silence.
  Fd silent = connect_loopback(gate->port());
  // Garbage as long as a proof: refused at once, with the refusal byte.
  Fd garbage = connect_loopback(gate->port());
  send_all(garbage.get(), std::string(gp::kClientProofBytes, 'G'));
  const auto garbage_got = recv_until_end(garbage.get());
  EXPECT_LT(ms_since(start), 1000) << "garbage was not refused before the handshake deadline";
  ASSERT_EQ(garbage_got.bytes.size(), gp::kGreetingBytes + 1);
  EXPECT_EQ(garbage_got.bytes.substr(0, gp::kMagic.size()), gp::kMagic);
  EXPECT_EQ(garbage_got.bytes.back(), gp::kRefused);

  // Meanwhile a rank is served.
  const std::string payload = random_payload(100000, 3);
  EXPECT_EQ(round_trip(relay.port(), payload).bytes, payload);
  EXPECT_FALSE(acc::testing::closed_by_peer(silent.get())) << "the silent client was dropped before its deadline";
  EXPECT_FALSE(acc::testing::closed_by_peer(store_client.get()));

  // Then the two stalled ones are dropped at the deadline, not before, not much after.
  for (Fd* stalled : {&store_client, &silent}) {
    const auto got = recv_until_end(stalled->get());
    EXPECT_EQ(got.bytes.size(), gp::kGreetingBytes) << "only the greeting";
    EXPECT_TRUE(got.end == End::kEof || got.end == End::kReset);
    EXPECT_GE(ms_since(start), 1400);
    EXPECT_LT(ms_since(start), 6000);
  }
  EXPECT_TRUE(eventually([&] { return gate->refused() == 3; })) << gate->refused();
  EXPECT_EQ(gate->admitted(), 1U);
  EXPECT_EQ(upstream.accepted(), 1);
}

TEST(StoreGate, AtTheCapTheOldestPendingHandshakeIsShed) {
  Upstream upstream;
  GateOptions options;
  options.handshake_timeout = 20s;  // nothing here waits for it
  options.max_pending_handshakes = 2;
  Messages refused;
  options.on_refused = refused.hook();
  auto gate = make_gate(upstream, kSecret, options);
  StoreRelay relay("127.0.0.1", gate->port(), kSecret);

  const auto start = Clock::now();
  Fd silent1 = connect_loopback(gate->port());
  Fd silent2 = connect_loopback(gate->port());
  ASSERT_TRUE(eventually([&] { return gate->connections() == 2; }));
  // A rank's connection is served at once: the oldest silent one makes room for it.
  const std::string payload = random_payload(1000, 4);
  EXPECT_EQ(round_trip(relay.port(), payload).bytes, payload);
  EXPECT_LT(ms_since(start), 2000) << "the rank waited in the backlog";
  EXPECT_EQ(gate->admitted(), 1U);
  const auto oldest = recv_until_end(silent1.get());
  EXPECT_EQ(oldest.bytes.size(), gp::kGreetingBytes) << "the oldest was closed after its greeting";
  EXPECT_FALSE(acc::testing::closed_by_peer(silent2.get())) << "only the oldest goes";
  ASSERT_FALSE(refused.get().empty());
  EXPECT_TRUE(contains(refused.get()[0], "more than 2 unauthenticated connections")) << refused.get()[0];
}

TEST(StoreGate, RelayRefusesAGateThatCannotProveTheSecret) {
  // An impostor on rank 0's address: greets, accepts any proof, sends a made-up MAC, then
  // collects whatever comes.
  Fd listener = listen_on();
  const int port = acc::detail::local_port(listener.get());
  std::string collected;
  std::thread impostor([&] {
    Fd connection(accept(listener.get(), nullptr, nullptr));
    acc::testing::set_io_timeout(connection.get(), acc::testing::kIoTimeout);
    send_all(connection.get(), std::string(gp::kMagic) + acc::detail::random_bytes(gp::kNonceBytes));
    collected = recv_exactly(connection.get(), gp::kClientProofBytes);
    send_all(connection.get(), gp::kAccepted + acc::detail::random_bytes(gp::kMacBytes));
    collected += recv_until_end(connection.get()).bytes;
  });
  StoreRelay relay("127.0.0.1", port, kSecret);
  Fd client = connect_loopback(relay.port());
  send_all(client.get(), "set rank-0-only-key secret-value");
  const auto received = recv_until_end(client.get());
  impostor.join();

  EXPECT_TRUE(received.bytes.empty());
  const auto failure = relay.wait_for_handshake(0ms);
  ASSERT_TRUE(failure.has_value());
  EXPECT_TRUE(contains(*failure, "could not prove that it knows ACC_STORE_SECRET")) << *failure;
  EXPECT_EQ(collected.size(), gp::kClientProofBytes) << "store bytes reached an impostor";
}

TEST(StoreGate, RelayNamesAServerThatIsNotAGate) {
  {  // A server that speaks first but not the protocol (here, HTTP).
    Fd listener = listen_on();
    std::thread http([&] {
      Fd connection(accept(listener.get(), nullptr, nullptr));
      send_all(connection.get(), "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
      acc::testing::set_io_timeout(connection.get(), acc::testing::kIoTimeout);
      recv_until_end(connection.get());
    });
    StoreRelay relay("127.0.0.1", acc::detail::local_port(listener.get()), kSecret);
    Fd client = connect_loopback(relay.port());
    const auto failure = relay.wait_for_handshake(5s);
    ASSERT_TRUE(failure.has_value());
    EXPECT_TRUE(contains(*failure, "is not an acc store gate (it began with \"HTTP/1.1 400 Bad")) << *failure;
    client.reset();
    http.join();
  }
  {  // A server that waits for its client to speak first, as a plain TCPStore server does.
    Fd listener = listen_on();
    RelayOptions options;
    options.handshake_timeout = 300ms;
    StoreRelay relay("127.0.0.1", acc::detail::local_port(listener.get()), kSecret, options);
    Fd client = connect_loopback(relay.port());
    const auto start = Clock::now();
    const auto failure = relay.wait_for_handshake(5s);
    ASSERT_TRUE(failure.has_value());
    EXPECT_LT(ms_since(start), 3000);
    EXPECT_TRUE(contains(*failure, "sent 0 of the 42 bytes of the store gate's greeting within 300 ms")) << *failure;
    EXPECT_EQ(recv_until_end(client.get()).bytes, "");
  }
}

TEST(StoreGate, RelayRefusesConnectionsFromOtherProcesses) {
  Upstream upstream;
  auto gate = make_gate(upstream);
  Messages refusals;
  RelayOptions options;
  options.on_refused = refusals.hook();
  StoreRelay relay("127.0.0.1", gate->port(), kSecret, options);
  const int port = relay.port();

  // The child does only async-signal-safe calls (the parent has threads). Exit status: 0 the
  // relay closed the connection without a byte, 1 it answered, 2 no answer, 3 no connection.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int fd = acc::testing::try_connect_loopback(port);
    if (fd < 0) _exit(3);
    timeval tv{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    (void)send(fd, "get key", 7, MSG_NOSIGNAL);
    char byte;
    const ssize_t n = recv(fd, &byte, 1, 0);
    if (n > 0) _exit(1);
    if (n == 0 || errno == ECONNRESET) _exit(0);
    _exit(2);
  }
  int status = 0;
  const bool reaped = eventually([&] { return waitpid(child, &status, WNOHANG) == child; }, 15s);
  if (!reaped) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
  }
  ASSERT_TRUE(reaped) << "the child did not finish";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the relay answered another process; 2: it left it hanging";
  EXPECT_EQ(relay.refused(), 1U);
  EXPECT_EQ(gate->admitted(), 0U) << "another process's connection was carried to the gate";
  const auto reported = refusals.get();
  ASSERT_EQ(reported.size(), 1U);
  EXPECT_TRUE(contains(reported[0], "it comes from another process (uid ")) << reported[0];

  // This process's own connection is carried.
  const std::string payload = random_payload(5000, 5);
  EXPECT_EQ(round_trip(port, payload).bytes, payload);
  EXPECT_EQ(relay.refused(), 1U);
  EXPECT_EQ(upstream.accepted(), 1);
}

TEST(StoreGate, AuthenticatedClientIsClosedWhenTheStoreIsGone) {
  // The store (upstream) is down: the handshake succeeds, then the gate closes the connection
  // instead of holding it open.
  int store_port = 0;
  {
    Fd probe = listen_on();
    store_port = acc::detail::local_port(probe.get());
  }
  StoreGate gate(listen_on().release(), "127.0.0.1", store_port, kSecret);
  StoreRelay relay("127.0.0.1", gate.port(), kSecret);
  Fd client = connect_loopback(relay.port());
  send_all(client.get(), "a store request");
  const auto received = recv_until_end(client.get());
  EXPECT_TRUE(received.bytes.empty());
  EXPECT_TRUE(received.end == End::kEof || received.end == End::kReset);
  EXPECT_EQ(relay.wait_for_handshake(0ms), std::nullopt) << "the handshake itself succeeded";
  EXPECT_EQ(gate.admitted(), 1U);
  EXPECT_TRUE(eventually([&] { return gate.connections() == 0; }));
  // The relay keeps its half of the connection while the client could still write (half-close);
  // the client's close ends it.
  client.reset();
  EXPECT_TRUE(eventually([&] { return relay.connections() == 0; }));
}

// --- reaching the gate -----------------------------------------------------------------------------

TEST(StoreRelay, RetriesUntilTheGateIsUp) {
  // Rank 0 starts later than this rank: its port refuses connections for a while.
  int port = 0;
  {
    Fd probe = listen_on();
    port = acc::detail::local_port(probe.get());
  }
  Upstream upstream;
  StoreRelay relay("127.0.0.1", port, kSecret);
  const std::string payload = random_payload(300000, 6);
  acc::testing::Received received;
  std::thread client([&] { received = round_trip(relay.port(), payload); });

  const auto waiting = relay.wait_for_handshake(300ms);
  ASSERT_TRUE(waiting.has_value());
  EXPECT_TRUE(contains(*waiting,
                       "within 300 ms; the last attempt failed connecting to rank 0's store gate at "
                       "127.0.0.1:" +
                           std::to_string(port) + ": Connection refused"))
      << *waiting;
  StoreGate gate(listen_on(port).release(), "127.0.0.1", upstream.port(), kSecret);
  client.join();
  EXPECT_EQ(received.bytes, payload);
  EXPECT_EQ(relay.wait_for_handshake(0ms), std::nullopt);
}

TEST(StoreRelay, GivesUpAfterTheConnectTimeout) {
  int port = 0;
  {
    Fd probe = listen_on();
    port = acc::detail::local_port(probe.get());
  }
  RelayOptions options;
  options.connect_timeout = 500ms;
  StoreRelay relay("127.0.0.1", port, kSecret, options);
  const auto start = Clock::now();
  Fd client = connect_loopback(relay.port());
  const auto received = recv_until_end(client.get());
  EXPECT_TRUE(received.end == End::kEof || received.end == End::kReset);
  EXPECT_GE(ms_since(start), 400);
  EXPECT_LT(ms_since(start), 4000);
  const auto failure = relay.failure();
  ASSERT_TRUE(failure.has_value());
  EXPECT_TRUE(contains(*failure, "could not connect to rank 0's store gate at 127.0.0.1:" + std::to_string(port) +
                                     " within 500 ms: Connection refused"))
      << *failure;
}

TEST(StoreRelay, CheckAnswersBeforeAnyStoreClientConnects) {
  Upstream upstream;
  auto gate = make_gate(upstream);
  {  // the right secret: one probe connection reaches the store and closes
    StoreRelay relay("127.0.0.1", gate->port(), kSecret);
    EXPECT_EQ(relay.check(5s), std::nullopt);
    EXPECT_TRUE(eventually([&] { return upstream.accepted() == 1 && relay.connections() == 0; }));
  }
  {  // a wrong one: named at once, the store untouched
    StoreRelay relay("127.0.0.1", gate->port(), acc::detail::new_store_secret());
    const auto start = Clock::now();
    const auto why = relay.check(5s);
    EXPECT_LT(ms_since(start), 2000);
    ASSERT_TRUE(why.has_value());
    EXPECT_TRUE(contains(*why, "refused this rank's ACC_STORE_SECRET")) << *why;
    EXPECT_EQ(upstream.accepted(), 1);
  }
  {  // no gate yet: says so when the caller's time is up
    int port = 0;
    {
      Fd probe = listen_on();
      port = acc::detail::local_port(probe.get());
    }
    StoreRelay relay("127.0.0.1", port, kSecret);
    const auto why = relay.check(300ms);
    ASSERT_TRUE(why.has_value());
    EXPECT_TRUE(contains(*why, "within 300 ms; the last attempt failed")) << *why;
  }
}

TEST(StoreRelay, UnresolvableGateHostIsADistributedError) {
  EXPECT_THROW(StoreRelay("no-such-host.invalid", 29500, kSecret), acc::DistributedError);
}

TEST(StoreGate, ConstructorRefusesBadArgumentsAndClosesTheDescriptor) {
  Upstream upstream;
  {  // not listening
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_THROW(StoreGate(fd, "127.0.0.1", upstream.port(), kSecret), acc::Error);
    EXPECT_EQ(fcntl(fd, F_GETFD), -1) << "the gate leaked the descriptor it was given";
  }
  {  // a short secret
    const int fd = listen_on().release();
    EXPECT_THROW(StoreGate(fd, "127.0.0.1", upstream.port(), "short"), acc::ConfigError);
    EXPECT_EQ(fcntl(fd, F_GETFD), -1);
  }
  EXPECT_THROW(StoreRelay("127.0.0.1", 1, "short"), acc::ConfigError);
}

// --- stopping ----------------------------------------------------------------------------------------

TEST(StoreGate, DestructionWithLiveConnectionsIsPrompt) {
  Upstream upstream;
  GateOptions gate_options;
  gate_options.handshake_timeout = 60s;
  auto gate = make_gate(upstream, kSecret, gate_options);
  auto relay = std::make_unique<StoreRelay>("127.0.0.1", gate->port(), kSecret);
  RelayOptions retrying;
  retrying.connect_timeout = 60s;
  int closed_port = 0;
  {
    Fd probe = listen_on();
    closed_port = acc::detail::local_port(probe.get());
  }
  auto stuck_relay = std::make_unique<StoreRelay>("127.0.0.1", closed_port, kSecret, retrying);

  std::vector<Fd> clients;
  for (int i = 0; i < 4; ++i) {  // relaying, mid-conversation
    clients.push_back(connect_loopback(relay->port()));
    ASSERT_TRUE(send_all(clients.back().get(), "ping"));
    ASSERT_EQ(recv_exactly(clients.back().get(), 4), "ping");
  }
  clients.push_back(connect_loopback(gate->port()));         // in the gate's handshake
  clients.push_back(connect_loopback(stuck_relay->port()));  // retrying an unreachable gate
  ASSERT_TRUE(eventually([&] { return gate->connections() == 5 && stuck_relay->connections() == 1; }));

  const auto start = Clock::now();
  stuck_relay.reset();
  relay.reset();
  gate.reset();
  EXPECT_LT(ms_since(start), 1000) << "destruction waited on its peers";
  for (auto& client : clients) {
    acc::testing::set_io_timeout(client.get(), 2s);
    const auto end = recv_until_end(client.get()).end;
    EXPECT_TRUE(end == End::kEof || end == End::kReset) << "a client was left connected";
  }
}

TEST(StoreGate, NoDescriptorOrThreadOutlivesTheGateAndRelay) {
  Upstream upstream;
  const int fds_before = entries("/proc/self/fd");
  const int threads_before = entries("/proc/self/task");
  {
    auto gate = make_gate(upstream);
    StoreRelay relay("127.0.0.1", gate->port(), kSecret);
    StoreRelay wrong("127.0.0.1", gate->port(), acc::detail::new_store_secret());
    EXPECT_EQ(entries("/proc/self/task"), threads_before + 3) << "one thread per gate and per relay";
    const std::string payload = random_payload(70000, 7);
    EXPECT_EQ(round_trip(relay.port(), payload).bytes, payload);
    EXPECT_EQ(round_trip(wrong.port(), payload).bytes, "");
    Fd silent = connect_loopback(gate->port());
    Fd idle = connect_loopback(relay.port());
    ASSERT_TRUE(send_all(idle.get(), "x"));
    ASSERT_EQ(recv_exactly(idle.get(), 1), "x");
  }  // the clients close first, then the relays and the gate, with connections open
  EXPECT_TRUE(eventually([&] { return entries("/proc/self/fd") == fds_before; }))
      << entries("/proc/self/fd") - fds_before << " descriptors more than before";
  EXPECT_TRUE(eventually([&] { return entries("/proc/self/task") == threads_before; }))
      << entries("/proc/self/task") - threads_before << " threads more than before";
}

// --- a flood of unauthenticated connections (issue 35, item 2) -----------------------------------

// Enough descriptors for a flood and the gate's side of it in one process.
void raise_descriptor_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

rlim_t descriptor_limit() {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  return limit.rlim_cur;
}

// `n` connections to 127.0.0.1:port from `source` (any 127.x.y.z is this machine) that never speak.
// Non-blocking connects: those beyond the listen backlog stay in SYN_SENT, as a real flood's would.
std::vector<Fd> idle_connections(int port, int n, const char* source = "127.0.0.1") {
  std::vector<Fd> fds;
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to.sin_port = htons(static_cast<uint16_t>(port));
  for (int i = 0; i < n; ++i) {
    Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) break;
    if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&from), sizeof(from)) != 0) break;
    if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&to), sizeof(to)) != 0 && errno != EINPROGRESS) break;
    fds.push_back(std::move(fd));
  }
  return fds;
}

// 3,000 idle connections, as the flood: with the gate's defaults (those rank 0 uses), a
// rank that connects after them must still get in, and quickly: before, the gate held 1,024
// unfinished handshakes for 10 s each and left the rest, the rank among them, in the listen backlog,
// so the rank's handshake timed out.
TEST(StoreGateFlood, ARankGetsInDuringAFloodOfIdleConnections) {
  raise_descriptor_limit();
  constexpr int kFlood = 3000;
  ASSERT_GE(descriptor_limit(), static_cast<rlim_t>(2 * kFlood + 200)) << "too few descriptors for the flood";
  Upstream upstream;
  auto gate = make_gate(upstream, kSecret, {}, SOMAXCONN);
  const auto idle = idle_connections(gate->port(), kFlood);
  ASSERT_EQ(idle.size(), static_cast<std::size_t>(kFlood));

  const auto start = Clock::now();
  RelayOptions options;  // as a rank's rendezvous sets them, for a 20 s deadline
  options.connect_timeout = 20s;
  options.handshake_timeout = 10s;
  StoreRelay relay("127.0.0.1", gate->port(), kSecret, options);
  const std::string payload = random_payload(1000, 7);
  const auto got = round_trip(relay.port(), payload);
  const double took = ms_since(start);
  std::cout << "[ measure  ] a rank's round trip during a flood of " << kFlood << " idle connections took "
            << static_cast<long>(took) << " ms; the relay says: " << relay.failure().value_or("no failure")
            << std::endl;
  EXPECT_EQ(got.bytes, payload) << relay.failure().value_or("");
  EXPECT_LT(took, 3000) << "the flood delayed the rank";
  EXPECT_EQ(gate->admitted(), 1U);
}


// A flood from one address (127.0.0.2) sheds only its own connections: a client from another
// address that is slow to answer the greeting still gets in.
TEST(StoreGateFlood, AFloodFromOneAddressDoesNotShedAnothersHandshake) {
  raise_descriptor_limit();
  Upstream upstream;
  auto gate = make_gate(upstream, kSecret, {}, SOMAXCONN);
  Fd slow = connect_loopback(gate->port());
  const std::string greeting = recv_exactly(slow.get(), gp::kGreetingBytes);
  ASSERT_EQ(greeting.size(), gp::kGreetingBytes);
  const auto idle = idle_connections(gate->port(), 2000, "127.0.0.2");
  ASSERT_EQ(idle.size(), 2000U);
  ASSERT_TRUE(eventually([&] { return gate->refused() >= 1000; }, 10s))
      << "the gate did not shed the flood: " << gate->refused() << " refused, " << gate->connections() << " held";
  acc::detail::ClientHandshake client(kSecret, "the gate");
  const auto proof = client.consume(greeting);
  ASSERT_EQ(proof.state, acc::detail::Handshake::State::kMore);
  ASSERT_TRUE(send_all(slow.get(), proof.reply));
  const std::string verdict = recv_exactly(slow.get(), 1 + gp::kMacBytes);
  ASSERT_EQ(verdict.size(), 1 + gp::kMacBytes) << "the slow client was dropped";
  EXPECT_EQ(client.consume(verdict.substr(0, 1)).state, acc::detail::Handshake::State::kMore);
  EXPECT_EQ(client.consume(verdict.substr(1)).state, acc::detail::Handshake::State::kDone);
  EXPECT_EQ(gate->admitted(), 1U);
}

// The flood from the rank's own address (the one-machine case): the oldest unauthenticated
// connections are shed, the ones held stay within the per-address cap.
TEST(StoreGateFlood, HeldHandshakesStayWithinThePerAddressCap) {
  raise_descriptor_limit();
  Upstream upstream;
  GateOptions options;
  options.max_pending_per_address = 32;
  auto gate = make_gate(upstream, kSecret, options, SOMAXCONN);
  const auto idle = idle_connections(gate->port(), 500);
  ASSERT_TRUE(eventually([&] { return gate->refused() >= 500 - 32; }, 10s))
      << gate->refused() << " refused, " << gate->connections() << " held, " << idle.size() << " opened";
  EXPECT_LE(gate->connections(), 32U);
  // The oldest went first: the first connection is closed after its greeting, the last is held.
  const int oldest = idle.front().get();
  fcntl(oldest, F_SETFL, fcntl(oldest, F_GETFL) & ~O_NONBLOCK);
  acc::testing::set_io_timeout(oldest, 5s);
  const auto first = recv_until_end(oldest);
  EXPECT_EQ(first.bytes.size(), gp::kGreetingBytes);
  EXPECT_FALSE(acc::testing::closed_by_peer(idle.back().get()));
}

// A gate under a flood closes the oldest unfinished handshakes, and a rank's may be among them: the
// relay connects again (as it does while the gate is not up) instead of failing the rank. Here a
// stand-in gate always closes after the proof, without a verdict.
TEST(StoreGateFlood, RelayConnectsAgainWhenTheGateClosesBeforeItsVerdict) {
  Fd listener = listen_on();
  const int port = acc::detail::local_port(listener.get());
  std::atomic<int> connections{0};
  std::atomic<bool> stop{false};
  std::thread shedding_gate([&] {
    while (!stop) {
      pollfd ready{listener.get(), POLLIN, 0};
      if (poll(&ready, 1, 50) != 1) continue;
      Fd connection(accept(listener.get(), nullptr, nullptr));
      ++connections;
      acc::testing::set_io_timeout(connection.get(), acc::testing::kIoTimeout);
      send_all(connection.get(), std::string(gp::kMagic) + acc::detail::random_bytes(gp::kNonceBytes));
      recv_exactly(connection.get(), gp::kClientProofBytes);
    }  // closed without a verdict
  });
  RelayOptions options;
  options.connect_timeout = 1500ms;
  StoreRelay relay("127.0.0.1", port, kSecret, options);
  const auto start = Clock::now();
  const auto failure = relay.check(5s);
  const double took = ms_since(start);
  stop = true;
  shedding_gate.join();
  ASSERT_TRUE(failure.has_value());
  EXPECT_GE(connections.load(), 2) << "the relay did not connect again: " << *failure;
  EXPECT_GE(took, 1400) << *failure;
  EXPECT_TRUE(contains(*failure, "within 1500 ms")) << *failure;
  EXPECT_TRUE(contains(*failure, "closed the connection without answering this rank's proof")) << *failure;
}

}  // namespace

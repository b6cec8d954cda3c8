// Rank 0's store gate (runtime/src/comm/gate/store_gate.h) on loopback: the handshake in front of the
// store, the keys served behind it (parked waits, timeouts, malformed frames), the peers it must
// refuse, and a flood of connections that never prove the secret. The clients here speak the
// protocol by hand (comm/gate/gate_handshake.h, comm/gate/store_protocol.h), so the gate is tested apart from
// acc's own client (store_client_test.cpp).
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

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

#include "comm/gate/gate_handshake.h"
#include "comm/gate/store_gate.h"
#include "comm/gate/store_protocol.h"
#include "loopback_peers.h"

namespace {

using namespace std::chrono_literals;
using acc::detail::GateOptions;
using acc::detail::StoreGate;
using acc::testing::connect_loopback;
using acc::testing::End;
using acc::testing::Fd;
using acc::testing::listen_on;
using acc::testing::random_payload;
using acc::testing::recv_exactly;
using acc::testing::recv_until_end;
using acc::testing::send_all;
using Clock = std::chrono::steady_clock;
namespace gp = acc::detail::gate_protocol;
namespace sp = acc::detail::store_protocol;

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

std::unique_ptr<StoreGate> make_gate(const std::string& secret = kSecret, GateOptions options = {},
                                     int backlog = 128) {
  return std::make_unique<StoreGate>(listen_on(0, backlog).release(), secret, std::move(options));
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

// The client's side of the handshake on `fd`, by hand. nullopt: admitted; else the failure.
std::optional<std::string> prove(int fd, const std::string& secret) {
  acc::detail::ClientHandshake client(secret, "the gate");
  for (;;) {
    const std::size_t needed = client.needed();
    const std::string bytes = recv_exactly(fd, needed);
    if (bytes.size() != needed) return client.failure_on_close(bytes.size());
    const auto step = client.consume(bytes);
    if (step.state == acc::detail::Handshake::State::kFailed) return step.error;
    if (!step.reply.empty() && !send_all(fd, step.reply)) return std::string("send failed");
    if (step.state == acc::detail::Handshake::State::kDone) return std::nullopt;
  }
}

// A connection that has passed the handshake.
Fd admitted(int port, const std::string& secret = kSecret) {
  Fd fd = connect_loopback(port);
  const auto failure = prove(fd.get(), secret);
  if (failure) throw std::runtime_error("the handshake failed: " + *failure);
  return fd;
}

// One request and its answer; nullopt when the connection ends first.
std::optional<sp::Response> call(int fd, const sp::Request& request) {
  if (!send_all(fd, sp::encode(request))) return std::nullopt;
  const std::string length = recv_exactly(fd, sp::kLengthBytes);
  if (length.size() != sp::kLengthBytes) return std::nullopt;
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(static_cast<uint8_t>(length[i])) << (8 * i);
  const std::string frame = length + recv_exactly(fd, n);
  sp::Response response;
  std::size_t consumed = 0;
  std::size_t wanted = 0;
  std::string error;
  if (sp::decode(frame, response, consumed, wanted, error) != sp::Decoded::kDone) return std::nullopt;
  return response;
}

sp::Request request(sp::Op op, std::vector<std::string> keys, std::vector<std::string> values = {},
                    int64_t number = 0) {
  static std::atomic<uint32_t> next_id{1};
  sp::Request r = sp::make_request(op, std::move(keys), std::move(values), number);
  r.id = next_id++;
  return r;
}

void set(int fd, const std::string& key, const std::string& value) {
  const auto answer = call(fd, request(sp::Op::kSet, {key}, {value}));
  ASSERT_TRUE(answer.has_value());
  ASSERT_EQ(answer->status, sp::Status::kOk);
}

std::optional<std::string> get(int fd, const std::string& key, int64_t timeout_ms = 5000) {
  const auto answer = call(fd, request(sp::Op::kGet, {key}, {}, timeout_ms));
  if (!answer || answer->status != sp::Status::kOk || answer->values.size() != 1) return std::nullopt;
  return answer->values[0];
}

// --- serving the keys -----------------------------------------------------------------------------

TEST(StoreGate, ServesKeysToAnAdmittedClientAndToThisProcess) {
  auto gate = make_gate();
  Fd remote = admitted(gate->port());
  Fd local = gate->adopt_local();  // rank 0's own connection: no handshake
  acc::testing::set_io_timeout(local.get(), acc::testing::kIoTimeout);
  set(remote.get(), "acc/job", "job-1");
  EXPECT_EQ(get(local.get(), "acc/job"), "job-1");
  const std::string large = random_payload(3 << 20, 5);  // larger than the socket buffers
  set(local.get(), "large", large);
  EXPECT_EQ(get(remote.get(), "large"), large);
  const auto added = call(remote.get(), request(sp::Op::kAdd, {"n"}, {}, 5));
  ASSERT_TRUE(added);
  EXPECT_EQ(added->number, 5);
  EXPECT_EQ(get(local.get(), "n"), "5") << "add keeps c10d's decimal text";
  EXPECT_EQ(gate->keys(), 3U);
  EXPECT_EQ(gate->admitted(), 1U);
}

TEST(StoreGate, AGetWaitsUntilAnotherConnectionSetsTheKey) {
  auto gate = make_gate();
  Fd waiter = admitted(gate->port());
  Fd writer = admitted(gate->port());
  std::optional<std::string> got;
  double waited = 0;
  std::thread blocked([&] {
    const auto start = Clock::now();
    got = get(waiter.get(), "late", 10000);
    waited = ms_since(start);
  });
  ASSERT_TRUE(eventually([&] { return gate->parked() == 1; }));
  std::this_thread::sleep_for(300ms);
  // The writer is served while the waiter waits: one parked request does not hold the loop.
  EXPECT_EQ(call(writer.get(), request(sp::Op::kCheck, {"late"}))->number, 0);
  const auto added = call(writer.get(), request(sp::Op::kAdd, {"late"}, {}, 7));  // add wakes too
  blocked.join();
  EXPECT_EQ(got, "7");
  EXPECT_GE(waited, 250);
  EXPECT_EQ(gate->parked(), 0U);
}

TEST(StoreGate, AWaitOnSeveralKeysEndsWhenTheLastIsWritten) {
  auto gate = make_gate();
  Fd waiter = admitted(gate->port());
  Fd writer = admitted(gate->port());
  std::optional<sp::Response> answer;
  std::thread blocked([&] { answer = call(waiter.get(), request(sp::Op::kMultiGet, {"a", "b", "c"}, {}, 10000)); });
  set(writer.get(), "c", "3");
  set(writer.get(), "a", "1");
  ASSERT_TRUE(eventually([&] { return gate->parked() == 1; }));
  EXPECT_EQ(gate->parked(), 1U) << "answered before every key was there";
  set(writer.get(), "b", "2");
  blocked.join();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->values, (std::vector<std::string>{"1", "2", "3"}));
}

TEST(StoreGate, AParkedRequestTimesOutOnTime) {
  auto gate = make_gate();
  Fd waiter = admitted(gate->port());
  const auto start = Clock::now();
  const auto answer = call(waiter.get(), request(sp::Op::kWait, {"never"}, {}, 400));
  const double took = ms_since(start);
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, sp::Status::kTimeout);
  EXPECT_GE(took, 390);
  EXPECT_LT(took, 440 + 200);
  // The connection goes on serving.
  set(waiter.get(), "k", "v");
  EXPECT_EQ(get(waiter.get(), "k"), "v");
  EXPECT_EQ(gate->parked(), 0U);
}

TEST(StoreGate, AClientGoneWhileItWaitsLeavesNothingBehind) {
  auto gate = make_gate();
  {
    Fd waiter = admitted(gate->port());
    ASSERT_TRUE(send_all(waiter.get(), sp::encode(request(sp::Op::kGet, {"never"}, {}, 0))));
    ASSERT_TRUE(eventually([&] { return gate->parked() == 1; }));
  }
  EXPECT_TRUE(eventually([&] { return gate->parked() == 0 && gate->connections() == 0; }))
      << gate->parked() << " parked, " << gate->connections() << " connections";
  Fd writer = admitted(gate->port());
  set(writer.get(), "never", "now");  // wakes nobody, and nothing breaks
  EXPECT_EQ(get(writer.get(), "never"), "now");
}

TEST(StoreGate, AMalformedOrOversizedFrameClosesOnlyItsConnection) {
  Messages refusals;
  GateOptions options;
  options.on_refused = refusals.hook();
  auto gate = make_gate(kSecret, options);
  Fd good = admitted(gate->port());
  {  // a length beyond the frame limit: closed before anything is allocated for it
    Fd huge = admitted(gate->port());
    ASSERT_TRUE(send_all(huge.get(), std::string("\xff\xff\xff\x7f", 4)));
    EXPECT_EQ(recv_until_end(huge.get()).bytes, "");
  }
  {  // a frame whose key count runs past its end
    Fd lying = admitted(gate->port());
    std::string frame = sp::encode(request(sp::Op::kGet, {"k"}, {}, 10));
    frame[4 + 4 + 1 + 8] = '\x7f';  // the key count's low byte
    ASSERT_TRUE(send_all(lying.get(), frame));
    EXPECT_EQ(recv_until_end(lying.get()).bytes, "");
  }
  set(good.get(), "still", "served");
  EXPECT_EQ(get(good.get(), "still"), "served");
  ASSERT_FALSE(refusals.get().empty());
  EXPECT_TRUE(contains(refusals.get()[0], "malformed store request")) << refusals.get()[0];
}

// --- refusing --------------------------------------------------------------------------------------

TEST(StoreGate, AWrongSecretIsRefusedAndNeverServed) {
  Messages refusals;
  GateOptions options;
  options.on_refused = refusals.hook();
  auto gate = make_gate(kSecret, options);
  Fd owner = admitted(gate->port());
  set(owner.get(), "acc/job", "secret job");
  for (int attempt = 0; attempt < 2; ++attempt) {
    Fd client = connect_loopback(gate->port());
    const auto failure = prove(client.get(), acc::detail::new_store_secret());
    ASSERT_TRUE(failure.has_value());
    EXPECT_TRUE(contains(*failure, "refused this rank's ACC_STORE_SECRET")) << *failure;
    // Whatever it sends next is never answered: the connection is closed.
    send_all(client.get(), sp::encode(request(sp::Op::kGet, {"acc/job"}, {}, 0)));
    const auto rest = recv_until_end(client.get());
    EXPECT_EQ(rest.bytes, "");
  }
  EXPECT_TRUE(eventually([&] { return gate->refused() == 2; })) << gate->refused();
  EXPECT_EQ(gate->admitted(), 1U);
  const auto reported = refusals.get();
  ASSERT_EQ(reported.size(), 1U) << "the first refusal only is reported";
  EXPECT_TRUE(contains(reported[0], "refused a connection from 127.0.0.1:")) << reported[0];
  EXPECT_TRUE(contains(reported[0], "does not match this job's store secret")) << reported[0];
}

// What another local user would try: store requests without a handshake, and c10d's TCPStore
// client bytes. Nothing of the store is ever sent back; the keys are unchanged.
TEST(StoreGate, RequestsWithoutTheHandshakeGetNothing) {
  GateOptions options;
  options.handshake_timeout = 1500ms;
  auto gate = make_gate(kSecret, options);
  Fd owner = admitted(gate->port());
  set(owner.get(), "acc/job", "secret job");
  const auto start = Clock::now();
  Fd store_client = connect_loopback(gate->port());  // c10d's validation query, then waiting
  send_all(store_client.get(), std::string("\x00\xce\xf7\x85\x3c", 5));
  Fd acc_request = connect_loopback(gate->port());  // acc frames at once, no proof
  send_all(acc_request.get(), sp::encode(request(sp::Op::kSet, {"acc/job"}, {"rogue"})) +
                                  sp::encode(request(sp::Op::kGet, {"acc/job"}, {}, 0)));
  Fd silent = connect_loopback(gate->port());
  Fd garbage = connect_loopback(gate->port());  // garbage as long as a proof: refused at once
  send_all(garbage.get(), std::string(gp::kClientProofBytes, 'G'));
  const auto garbage_got = recv_until_end(garbage.get());
  EXPECT_LT(ms_since(start), 1000) << "garbage was not refused before the handshake deadline";
  ASSERT_EQ(garbage_got.bytes.size(), gp::kGreetingBytes + 1);
  EXPECT_EQ(garbage_got.bytes.substr(0, gp::kMagic.size()), gp::kMagic);
  EXPECT_EQ(garbage_got.bytes.back(), gp::kRefused);

  // Meanwhile a rank is served.
  EXPECT_EQ(get(owner.get(), "acc/job"), "secret job");
  EXPECT_FALSE(acc::testing::closed_by_peer(silent.get())) << "the silent client was dropped before its deadline";

  for (Fd* stalled : {&store_client, &acc_request, &silent}) {
    const auto got = recv_until_end(stalled->get());
    // The greeting, and a refusal for the acc frames read as a (wrong) proof: never a key.
    EXPECT_LE(got.bytes.size(), gp::kGreetingBytes + 1);
    EXPECT_FALSE(contains(got.bytes, "secret job"));
    EXPECT_TRUE(got.end == End::kEof || got.end == End::kReset);
    EXPECT_LT(ms_since(start), 6000);
  }
  EXPECT_EQ(get(owner.get(), "acc/job"), "secret job") << "an unauthenticated request changed a key";
  EXPECT_TRUE(eventually([&] { return gate->refused() == 4; })) << gate->refused();
  EXPECT_EQ(gate->admitted(), 1U);
}

TEST(StoreGate, AtTheCapTheOldestPendingHandshakeIsShed) {
  GateOptions options;
  options.handshake_timeout = 20s;  // nothing here waits for it
  options.max_pending_handshakes = 2;
  Messages refused;
  options.on_refused = refused.hook();
  auto gate = make_gate(kSecret, options);

  const auto start = Clock::now();
  Fd silent1 = connect_loopback(gate->port());
  Fd silent2 = connect_loopback(gate->port());
  ASSERT_TRUE(eventually([&] { return gate->connections() == 2; }));
  // A rank's connection is served at once: the oldest silent one makes room for it.
  Fd rank = admitted(gate->port());
  set(rank.get(), "k", "v");
  EXPECT_LT(ms_since(start), 2000) << "the rank waited in the backlog";
  EXPECT_EQ(gate->admitted(), 1U);
  const auto oldest = recv_until_end(silent1.get());
  EXPECT_EQ(oldest.bytes.size(), gp::kGreetingBytes) << "the oldest was closed after its greeting";
  EXPECT_FALSE(acc::testing::closed_by_peer(silent2.get())) << "only the oldest goes";
  ASSERT_FALSE(refused.get().empty());
  EXPECT_TRUE(contains(refused.get()[0], "more than 2 unauthenticated connections")) << refused.get()[0];
}

TEST(StoreGate, ConstructorRefusesBadArgumentsAndClosesTheDescriptor) {
  {  // not listening
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_THROW(StoreGate(fd, kSecret), acc::Error);
    EXPECT_EQ(fcntl(fd, F_GETFD), -1) << "the gate leaked the descriptor it was given";
  }
  {  // a short secret
    const int fd = listen_on().release();
    EXPECT_THROW(StoreGate(fd, "short"), acc::ConfigError);
    EXPECT_EQ(fcntl(fd, F_GETFD), -1);
  }
}

// --- stopping ----------------------------------------------------------------------------------------

TEST(StoreGate, DestructionWithLiveAndWaitingConnectionsIsPrompt) {
  GateOptions options;
  options.handshake_timeout = 60s;
  auto gate = make_gate(kSecret, options);
  std::vector<Fd> clients;
  for (int i = 0; i < 3; ++i) {  // served, then waiting for a key without a timeout
    clients.push_back(admitted(gate->port()));
    set(clients.back().get(), "k" + std::to_string(i), "v");
    ASSERT_TRUE(send_all(clients.back().get(), sp::encode(request(sp::Op::kGet, {"never"}, {}, 0))));
  }
  clients.push_back(gate->adopt_local());
  clients.push_back(connect_loopback(gate->port()));  // in its handshake
  ASSERT_TRUE(eventually([&] { return gate->connections() == 5 && gate->parked() == 3; }));

  const auto start = Clock::now();
  gate.reset();
  EXPECT_LT(ms_since(start), 1000) << "destruction waited on its peers";
  for (auto& client : clients) {
    acc::testing::set_io_timeout(client.get(), 2s);
    const auto got = recv_until_end(client.get());
    EXPECT_TRUE(got.end == End::kEof || got.end == End::kReset) << "a client was left connected";
  }
}

TEST(StoreGate, NoDescriptorOrThreadOutlivesTheGate) {
  const int fds_before = entries("/proc/self/fd");
  const int threads_before = entries("/proc/self/task");
  {
    auto gate = make_gate();
    EXPECT_EQ(entries("/proc/self/task"), threads_before + 1) << "one thread per gate";
    Fd rank = admitted(gate->port());
    set(rank.get(), "k", random_payload(70000, 7));
    Fd local = gate->adopt_local();
    Fd silent = connect_loopback(gate->port());
    Fd wrong = connect_loopback(gate->port());
    EXPECT_TRUE(prove(wrong.get(), acc::detail::new_store_secret()).has_value());
  }  // the clients close first, then the gate, with connections open
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
  auto gate = make_gate(kSecret, {}, SOMAXCONN);
  const auto idle = idle_connections(gate->port(), kFlood);
  ASSERT_EQ(idle.size(), static_cast<std::size_t>(kFlood));

  const auto start = Clock::now();
  // As a rank connects: a connection shed before the verdict is made again (store_client.cpp).
  std::optional<std::string> value;
  std::string failure;
  for (int attempt = 0; attempt < 20 && !value; ++attempt) {
    try {
      Fd rank = admitted(gate->port());
      set(rank.get(), "k", "v");
      value = get(rank.get(), "k");
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  const double took = ms_since(start);
  std::cout << "[ measure  ] a rank's round trip during a flood of " << kFlood << " idle connections took "
            << static_cast<long>(took) << " ms" << std::endl;
  EXPECT_EQ(value, "v") << failure;
  EXPECT_LT(took, 3000) << "the flood delayed the rank";
  EXPECT_GE(gate->admitted(), 1U);
}

// A flood from one address (127.0.0.2) sheds only its own connections: a client from another
// address that is slow to answer the greeting still gets in.
TEST(StoreGateFlood, AFloodFromOneAddressDoesNotShedAnothersHandshake) {
  raise_descriptor_limit();
  auto gate = make_gate(kSecret, {}, SOMAXCONN);
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
  GateOptions options;
  options.max_pending_per_address = 32;
  auto gate = make_gate(kSecret, options, SOMAXCONN);
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

}  // namespace

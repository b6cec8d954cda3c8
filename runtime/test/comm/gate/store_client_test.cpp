// The store's client connection (runtime/src/comm/gate/store_client.h) on loopback: every op against a
// real StoreGate, blocking and timing out, connecting before the gate exists and giving up, the
// gate gone under a parked GET, a gate that sheds the connection before its verdict, and servers
// that are not this job's gate or break the protocol after the handshake.
#include <gtest/gtest.h>
#include <poll.h>

#include <acc/errors.h>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/gate/gate_handshake.h"
#include "comm/gate/socket_util.h"
#include "comm/gate/store_client.h"
#include "comm/gate/store_gate.h"
#include "comm/gate/store_protocol.h"
#include "loopback_peers.h"

namespace {

using namespace std::chrono_literals;
using acc::DistributedError;
using acc::detail::StoreClientOptions;
using acc::detail::StoreConnection;
using acc::detail::StoreConnectionLost;
using acc::detail::StoreGate;
using acc::testing::Fd;
using acc::testing::listen_on;
using acc::testing::recv_exactly;
using acc::testing::send_all;
using Clock = std::chrono::steady_clock;
namespace sp = acc::detail::store_protocol;
namespace gp = acc::detail::gate_protocol;

const std::string kSecret = acc::detail::new_store_secret();

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout = 5s) {
  const auto until = Clock::now() + timeout;
  while (!condition()) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

std::unique_ptr<StoreGate> make_gate() {
  return std::make_unique<StoreGate>(acc::testing::listen_on().release(), kSecret);
}

StoreConnection connect_to(int port, const std::string& secret = kSecret, StoreClientOptions options = {}) {
  return StoreConnection::connect("127.0.0.1", port, secret, options);
}

using sp::make_request;

// A port nothing listens on now (one the kernel gave out, then closed).
int free_port() {
  Fd probe = listen_on();
  return acc::detail::local_port(probe.get());
}

// A loopback server that is not rank 0's gate, or misbehaves after the handshake: serves each
// connection it accepts with `serve`, one at a time, on its own thread.
class FakeServer {
 public:
  explicit FakeServer(std::function<void(int)> serve) : listener_(listen_on()), serve_(std::move(serve)) {
    port_ = acc::detail::local_port(listener_.get());
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd ready{listener_.get(), POLLIN, 0};
        if (poll(&ready, 1, 50) != 1) continue;
        Fd connection(accept(listener_.get(), nullptr, nullptr));
        if (!connection.valid()) continue;
        ++accepted_;
        acc::testing::set_io_timeout(connection.get(), acc::testing::kIoTimeout);
        serve_(connection.get());
      }
    });
  }
  ~FakeServer() {
    stop_ = true;
    thread_.join();
  }
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;
  int port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  Fd listener_;
  int port_ = 0;
  std::function<void(int)> serve_;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

// The gate's side of a correct handshake with kSecret.
bool serve_handshake(int fd) {
  acc::detail::ServerHandshake handshake(kSecret);
  if (!send_all(fd, handshake.opening())) return false;
  const auto step = handshake.consume(recv_exactly(fd, handshake.needed()));
  return send_all(fd, step.reply) && step.state == acc::detail::Handshake::State::kDone;
}

// Reads one request frame (nullopt when the client closed first).
std::optional<sp::Request> read_request(int fd) {
  std::string frame = recv_exactly(fd, sp::kLengthBytes);
  if (frame.size() < sp::kLengthBytes) return std::nullopt;
  std::size_t consumed = 0, wanted = 0;
  std::string error;
  sp::Request request;
  if (sp::decode(frame, request, consumed, wanted, error) != sp::Decoded::kIncomplete) return std::nullopt;
  frame += recv_exactly(fd, wanted - frame.size());
  if (sp::decode(frame, request, consumed, wanted, error) != sp::Decoded::kDone) return std::nullopt;
  return request;
}

// Waits until the client closes the connection.
void drain(int fd) {
  char buffer[256];
  while (recv(fd, buffer, sizeof(buffer), 0) > 0) {
  }
}

// --- every op through a real gate --------------------------------------------------------------

TEST(StoreClient, EveryOpRoundTripsThroughTheGate) {
  auto gate = make_gate();
  StoreConnection store = connect_to(gate->port());
  EXPECT_EQ(store.name(), "rank 0's store at 127.0.0.1:" + std::to_string(gate->port()));
  auto ok = [&](sp::Request request) {
    const sp::Response response = store.call(std::move(request), 5s);
    EXPECT_EQ(response.status, sp::Status::kOk) << (response.values.empty() ? "" : response.values[0]);
    return response;
  };

  ok(make_request(sp::Op::kSet, {"a"}, {"alpha"}));
  EXPECT_EQ(ok(make_request(sp::Op::kGet, {"a"}, {}, 1000)).values, std::vector<std::string>{"alpha"});
  // compareSet: c10d's four cases.
  EXPECT_EQ(ok(make_request(sp::Op::kCompareSet, {"c"}, {"", "d"})).values, std::vector<std::string>{"d"});
  EXPECT_EQ(ok(make_request(sp::Op::kCompareSet, {"c2"}, {"x", "y"})).values, std::vector<std::string>{"x"});
  EXPECT_EQ(ok(make_request(sp::Op::kCheck, {"c2"})).number, 0)
      << "a missing key with a non-empty expectation is not set";
  EXPECT_EQ(ok(make_request(sp::Op::kCompareSet, {"c"}, {"d", "e"})).values, std::vector<std::string>{"e"});
  EXPECT_EQ(ok(make_request(sp::Op::kCompareSet, {"c"}, {"zz", "f"})).values, std::vector<std::string>{"e"});
  // add: decimal text, a missing key counts as 0.
  EXPECT_EQ(ok(make_request(sp::Op::kAdd, {"n"}, {}, 5)).number, 5);
  EXPECT_EQ(ok(make_request(sp::Op::kAdd, {"n"}, {}, -2)).number, 3);
  EXPECT_EQ(ok(make_request(sp::Op::kGet, {"n"}, {}, 1000)).values, std::vector<std::string>{"3"});
  const sp::Response not_a_number = store.call(make_request(sp::Op::kAdd, {"a"}, {}, 1), 5s);
  EXPECT_EQ(not_a_number.status, sp::Status::kError);
  ASSERT_EQ(not_a_number.values.size(), 1U);
  EXPECT_FALSE(not_a_number.values[0].empty());
  // delete, check, count.
  ok(make_request(sp::Op::kSet, {"gone"}, {"1"}));
  EXPECT_EQ(ok(make_request(sp::Op::kDelete, {"gone"})).number, 1);
  EXPECT_EQ(ok(make_request(sp::Op::kDelete, {"gone"})).number, 0);
  EXPECT_EQ(ok(make_request(sp::Op::kCheck, {"a", "n"})).number, 1);
  EXPECT_EQ(ok(make_request(sp::Op::kCheck, {"a", "gone"})).number, 0);
  EXPECT_EQ(ok(make_request(sp::Op::kNumKeys, {})).number, 3) << "a, c, n";
  ok(make_request(sp::Op::kWait, {"a", "c", "n"}, {}, 1000));
  // append creates, then extends.
  ok(make_request(sp::Op::kAppend, {"log"}, {"x"}));
  ok(make_request(sp::Op::kAppend, {"log"}, {"yz"}));
  EXPECT_EQ(ok(make_request(sp::Op::kMultiGet, {"log", "n"}, {}, 1000)).values, (std::vector<std::string>{"xyz", "3"}));
  ok(make_request(sp::Op::kMultiSet, {"m1", "m2"}, {"1", std::string("\0\xff", 2)}));
  EXPECT_EQ(ok(make_request(sp::Op::kMultiGet, {"m2", "m1"}, {}, 1000)).values,
            (std::vector<std::string>{std::string("\0\xff", 2), "1"}));
  EXPECT_EQ(ok(make_request(sp::Op::kNumKeys, {})).number, 6);

  // Rank 0's own connection (no handshake) sees the same table.
  StoreConnection local(Fd(gate->adopt_local()));
  const sp::Response seen = local.call(make_request(sp::Op::kGet, {"log"}, {}, 1000), 5s);
  EXPECT_EQ(seen.status, sp::Status::kOk);
  EXPECT_EQ(seen.values, std::vector<std::string>{"xyz"});
  EXPECT_EQ(gate->admitted(), 1U);
}

TEST(StoreClient, ALargeValueRoundTrips) {
  auto gate = make_gate();
  StoreConnection store = connect_to(gate->port());
  const std::string value = acc::testing::random_payload(16 << 20, 3);
  EXPECT_EQ(store.call(make_request(sp::Op::kSet, {"big"}, {value}), 30s).status, sp::Status::kOk);
  StoreConnection other = connect_to(gate->port());
  const sp::Response got = other.call(make_request(sp::Op::kGet, {"big"}, {}, 1000), 30s);
  ASSERT_EQ(got.values.size(), 1U);
  EXPECT_TRUE(got.values[0] == value) << "16 MiB came back changed";
}

TEST(StoreClient, AGetWaitsUntilAnotherConnectionSets) {
  auto gate = make_gate();
  StoreConnection waiter = connect_to(gate->port());
  StoreConnection setter = connect_to(gate->port());
  const auto start = Clock::now();
  std::thread later([&] {
    std::this_thread::sleep_for(300ms);
    setter.call(make_request(sp::Op::kSet, {"late"}, {"here"}), 5s);
  });
  const sp::Response got = waiter.call(make_request(sp::Op::kGet, {"late"}, {}, 10000), 12s);
  const double took = ms_since(start);
  later.join();
  EXPECT_EQ(got.status, sp::Status::kOk);
  EXPECT_EQ(got.values, std::vector<std::string>{"here"});
  EXPECT_GE(took, 250);
  EXPECT_LT(took, 5000);
}

TEST(StoreClient, AGetTimesOutWithTheTimeoutStatusAtItsDeadline) {
  auto gate = make_gate();
  StoreConnection store = connect_to(gate->port());
  for (const int timeout_ms : {1000, 2000}) {  // 10 % of these is more than a loaded machine's scheduling delay
    const auto start = Clock::now();
    const sp::Response got =
        store.call(make_request(sp::Op::kGet, {"never"}, {}, timeout_ms), std::chrono::milliseconds(timeout_ms + 2000));
    const double took = ms_since(start);
    EXPECT_EQ(got.status, sp::Status::kTimeout);
    EXPECT_GE(took, timeout_ms);
    EXPECT_LE(took, timeout_ms * 1.1) << "the store's timeout must hold within 10 %";
  }
  // The connection is still good after a timeout.
  EXPECT_EQ(store.call(make_request(sp::Op::kSet, {"k"}, {"v"}), 5s).status, sp::Status::kOk);
}

// --- reaching the gate -------------------------------------------------------------------------

TEST(StoreClient, AWrongSecretIsNamedAtOnce) {
  auto gate = make_gate();
  const auto start = Clock::now();
  try {
    connect_to(gate->port(), acc::detail::new_store_secret());
    FAIL() << "a wrong secret connected";
  } catch (const StoreConnectionLost& e) {
    FAIL() << "a refusal is not a lost connection: " << e.what();
  } catch (const DistributedError& e) {
    EXPECT_TRUE(contains(e.what(), "rank 0's store at 127.0.0.1:" + std::to_string(gate->port()) +
                                       " refused this rank's ACC_STORE_SECRET"))
        << e.what();
  }
  EXPECT_LT(ms_since(start), 1000) << "a refusal is not retried";
  EXPECT_TRUE(eventually([&] { return gate->refused() == 1; })) << gate->refused();
  EXPECT_EQ(gate->admitted(), 0U);
}

TEST(StoreClient, AShortSecretIsRefusedBeforeConnecting) {
  EXPECT_THROW(connect_to(free_port(), "short"), acc::ConfigError);
}

TEST(StoreClient, RetriesUntilTheGateIsUp) {
  // Rank 0 starts later than this rank: its port refuses connections for a while.
  const int port = free_port();
  std::unique_ptr<StoreGate> gate;
  std::thread rank0([&] {
    std::this_thread::sleep_for(500ms);
    gate = std::make_unique<StoreGate>(listen_on(port).release(), kSecret);
  });
  const auto start = Clock::now();
  StoreClientOptions options;
  options.connect_timeout = 10s;
  std::optional<StoreConnection> store;
  try {
    store.emplace(connect_to(port, kSecret, options));
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  const double took = ms_since(start);
  rank0.join();
  ASSERT_TRUE(store.has_value());
  EXPECT_GE(took, 450);
  EXPECT_LT(took, 3000) << "retries back off to 1 s at most";
  EXPECT_EQ(store->call(make_request(sp::Op::kSet, {"k"}, {"v"}), 5s).status, sp::Status::kOk);
}

TEST(StoreClient, GivesUpAfterTheConnectTimeoutNamingTheGate) {
  const int port = free_port();
  StoreClientOptions options;
  options.connect_timeout = 500ms;
  const auto start = Clock::now();
  try {
    connect_to(port, kSecret, options);
    FAIL() << "connected to a port nothing listens on";
  } catch (const DistributedError& e) {
    EXPECT_TRUE(contains(e.what(), "could not reach rank 0's store gate at 127.0.0.1:" + std::to_string(port) +
                                       " within 500 ms: Connection refused"))
        << e.what();
    EXPECT_TRUE(contains(e.what(), "Rank 0 has not started or has exited")) << e.what();
  }
  EXPECT_GE(ms_since(start), 450);
  EXPECT_LT(ms_since(start), 2000);
}

// A gate under a flood closes the oldest unfinished handshakes; the client connects again.
TEST(StoreClient, ConnectsAgainWhenTheGateClosesBeforeItsVerdict) {
  std::atomic<int> shed{0};
  FakeServer shedding_gate([&](int fd) {
    send_all(fd, std::string(gp::kMagic) + acc::detail::random_bytes(gp::kNonceBytes));
    recv_exactly(fd, gp::kClientProofBytes);
    ++shed;
  });  // closed without a verdict
  StoreClientOptions options;
  options.connect_timeout = 1500ms;
  const auto start = Clock::now();
  try {
    connect_to(shedding_gate.port(), kSecret, options);
    FAIL() << "connected through a gate that never answered";
  } catch (const DistributedError& e) {
    EXPECT_GE(shed.load(), 2) << "the client did not connect again: " << e.what();
    EXPECT_GE(ms_since(start), 1400) << e.what();
    EXPECT_TRUE(contains(e.what(), "within 1500 ms")) << e.what();
    EXPECT_TRUE(contains(e.what(), "closed the connection without answering this rank's proof")) << e.what();
  }
}

TEST(StoreClient, AShedConnectionIsMadeAgainAndSucceeds) {
  // The first connection is shed before the verdict; then the real gate takes over the socket.
  Fd listener = listen_on();
  const int port = acc::detail::local_port(listener.get());
  std::unique_ptr<StoreGate> gate;
  std::thread rank0([&] {
    Fd first(accept(listener.get(), nullptr, nullptr));
    acc::testing::set_io_timeout(first.get(), acc::testing::kIoTimeout);
    send_all(first.get(), std::string(gp::kMagic) + acc::detail::random_bytes(gp::kNonceBytes));
    recv_exactly(first.get(), gp::kClientProofBytes);
    first.reset();
    gate = std::make_unique<StoreGate>(listener.release(), kSecret);
  });
  std::optional<StoreConnection> store;
  try {
    store.emplace(connect_to(port));
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  rank0.join();
  ASSERT_TRUE(store.has_value());
  EXPECT_EQ(store->call(make_request(sp::Op::kAdd, {"n"}, {}, 2), 5s).number, 2);
  EXPECT_EQ(gate->admitted(), 1U);
}

TEST(StoreClient, AServerThatIsNotAGateIsNamed) {
  FakeServer http([](int fd) {
    send_all(fd, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    drain(fd);
  });
  const auto start = Clock::now();
  try {
    connect_to(http.port());
    FAIL() << "a web server passed for a gate";
  } catch (const DistributedError& e) {
    EXPECT_TRUE(contains(e.what(), "the server at 127.0.0.1:" + std::to_string(http.port()) +
                                       " is not an acc store gate (it began with \"HTTP/1.1 400 Bad"))
        << e.what();
  }
  EXPECT_LT(ms_since(start), 1000);
  EXPECT_EQ(http.accepted(), 1) << "a server that is not a gate is not retried";
}

TEST(StoreClient, AServerThatSaysNothingIsNamedAfterTheHandshakeTimeout) {
  FakeServer silent([](int fd) { drain(fd); });  // like a TCPStore server: waits for its client
  StoreClientOptions options;
  options.handshake_timeout = 300ms;
  const auto start = Clock::now();
  try {
    connect_to(silent.port(), kSecret, options);
    FAIL() << "a silent server passed for a gate";
  } catch (const DistributedError& e) {
    EXPECT_TRUE(contains(e.what(), "sent 0 of the 42 bytes of the store gate's greeting within 300 ms")) << e.what();
  }
  EXPECT_GE(ms_since(start), 290);
  EXPECT_LT(ms_since(start), 2000);
}

// --- losing the connection ---------------------------------------------------------------------

TEST(StoreClient, AParkedGetLosesItsConnectionPromptlyWhenTheGateIsDestroyed) {
  auto gate = make_gate();
  StoreConnection remote = connect_to(gate->port());
  StoreConnection local(Fd(gate->adopt_local()));
  std::atomic<int> lost{0};
  std::vector<std::string> texts(2);
  auto park = [&](StoreConnection& store, int i) {
    try {
      store.call(make_request(sp::Op::kGet, {"never"}, {}, 0), 0ms);  // no timeout at all: only the end wakes it
    } catch (const StoreConnectionLost& e) {
      texts[i] = e.what();
      ++lost;
    }
  };
  std::thread a([&] { park(remote, 0); });
  std::thread b([&] { park(local, 1); });
  ASSERT_TRUE(eventually([&] { return gate->connections() == 2; }));
  std::this_thread::sleep_for(200ms);  // both GETs parked
  const auto start = Clock::now();
  gate.reset();
  a.join();
  b.join();
  EXPECT_LT(ms_since(start), 1000);
  EXPECT_EQ(lost.load(), 2);
  EXPECT_TRUE(contains(texts[0], "closed the connection before answering a GET request")) << texts[0];
  EXPECT_TRUE(contains(texts[0], "rank 0's store at 127.0.0.1:")) << texts[0];
  EXPECT_TRUE(contains(texts[1], "closed the connection before answering a GET request")) << texts[1];
  // Later calls fail at once, saying why.
  EXPECT_FALSE(remote.is_open());
  try {
    remote.call(make_request(sp::Op::kCheck, {"k"}), 5s);
    FAIL() << "a lost connection answered";
  } catch (const StoreConnectionLost& e) {
    EXPECT_TRUE(contains(e.what(), "an earlier call lost it")) << e.what();
  }
}

TEST(StoreClient, AClientThatGivesUpOnAParkedGetLeavesNothingBehindOnTheGate) {
  auto gate = make_gate();
  {
    StoreConnection store = connect_to(gate->port());
    // The server waits forever; this client only 300 ms, then closes its side.
    EXPECT_THROW(store.call(make_request(sp::Op::kGet, {"never"}, {}, 0), 300ms), StoreConnectionLost);
    EXPECT_FALSE(store.is_open());
  }
  EXPECT_TRUE(eventually([&] { return gate->parked() == 0 && gate->connections() == 0; }))
      << gate->parked() << " parked, " << gate->connections() << " connections";
  // The key's waiter list is gone too: a set afterwards answers nobody and breaks nothing.
  StoreConnection setter = connect_to(gate->port());
  EXPECT_EQ(setter.call(make_request(sp::Op::kSet, {"never"}, {"now"}), 5s).status, sp::Status::kOk);
  EXPECT_EQ(setter.call(make_request(sp::Op::kGet, {"never"}, {}, 1000), 5s).values, std::vector<std::string>{"now"});
}

TEST(StoreClient, NoAnswerWithinTheDeadlineLosesTheConnection) {
  FakeServer stuck([](int fd) {
    if (serve_handshake(fd)) drain(fd);  // reads the request, never answers
  });
  StoreConnection store = connect_to(stuck.port());
  const auto start = Clock::now();
  try {
    store.call(make_request(sp::Op::kCheck, {"k"}), 300ms);
    FAIL() << "a server that never answered answered";
  } catch (const StoreConnectionLost& e) {
    EXPECT_TRUE(contains(e.what(), "did not answer a CHECK request within 300 ms")) << e.what();
  }
  EXPECT_GE(ms_since(start), 290);
  EXPECT_LT(ms_since(start), 1000);
  EXPECT_FALSE(store.is_open());
}

TEST(StoreClient, AnAnswerToAnotherRequestLosesTheConnection) {
  FakeServer out_of_step([](int fd) {
    if (!serve_handshake(fd)) return;
    const auto request = read_request(fd);
    if (!request) return;
    sp::Response response;
    response.id = request->id + 7;
    send_all(fd, sp::encode(response));
    drain(fd);
  });
  StoreConnection store = connect_to(out_of_step.port());
  try {
    store.call(make_request(sp::Op::kNumKeys, {}), 5s);
    FAIL() << "an answer to another request was taken";
  } catch (const StoreConnectionLost& e) {
    EXPECT_TRUE(contains(e.what(), "the connection is out of step")) << e.what();
  }
  EXPECT_FALSE(store.is_open());
}

TEST(StoreClient, AMalformedAnswerLosesTheConnection) {
  FakeServer garbage([](int fd) {
    if (!serve_handshake(fd)) return;
    if (!read_request(fd)) return;
    send_all(fd, std::string("\xff\xff\xff\xff", 4) + "garbage");  // a length beyond every limit
    drain(fd);
  });
  StoreConnection store = connect_to(garbage.port());
  try {
    store.call(make_request(sp::Op::kGet, {"k"}, {}, 1000), 5s);
    FAIL() << "garbage was taken for an answer";
  } catch (const StoreConnectionLost& e) {
    EXPECT_TRUE(contains(e.what(), "answered a GET request with a malformed frame")) << e.what();
  }
}

TEST(StoreClient, ARequestBeyondTheLimitsIsRefusedAndTheConnectionStaysUsable) {
  auto gate = make_gate();
  StoreConnection store = connect_to(gate->port());
  try {
    store.call(make_request(sp::Op::kSet, {std::string(sp::kMaxKeyBytes + 1, 'k')}, {"v"}), 5s);
    FAIL() << "an oversized key was sent";
  } catch (const StoreConnectionLost& e) {
    FAIL() << "the connection was given up: " << e.what();
  } catch (const DistributedError& e) {
    EXPECT_TRUE(contains(e.what(), "has a key of " + std::to_string(sp::kMaxKeyBytes + 1) + " bytes (at most " +
                                       std::to_string(sp::kMaxKeyBytes) + ")"))
        << e.what();
  }
  EXPECT_TRUE(store.is_open());
  EXPECT_EQ(store.call(make_request(sp::Op::kSet, {"k"}, {"v"}), 5s).status, sp::Status::kOk);
}

}  // namespace

#include "comm/store_gate.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <acc/errors.h>
#include <cerrno>

#include "comm/gate_handshake.h"
#include "comm/hmac_sha256.h"
#include "comm/peer_process.h"
#include "comm/socket_relay.h"
#include "comm/socket_util.h"

namespace acc::detail {

namespace {

// The store is on rank 0's loopback: a connect that takes this long will not succeed.
constexpr std::chrono::milliseconds kUpstreamConnectTimeout{10000};

std::string seconds_text(std::chrono::milliseconds timeout) {
  const auto ms = timeout.count();
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
}

}  // namespace

std::string new_store_secret() { return to_hex(random_bytes(32)); }

// --- the gate ------------------------------------------------------------------------------------

StoreGate::StoreGate(int listen_fd, const std::string& upstream_host, int upstream_port, std::string secret,
                     GateOptions options)
    : counters_(std::make_unique<Counters>()) {
  Fd listener(listen_fd);  // owned from here on: closed on every path out
  check_store_secret(secret);
  port_ = local_port(listener.get());

  RelayLoopConfig config;
  config.listener = std::move(listener);
  config.target = resolve_tcp(upstream_host, upstream_port);
  config.target_name = "the store at " + upstream_host + ":" + std::to_string(upstream_port);
  config.handshake_leg = RelayLoopConfig::HandshakeLeg::kAccepted;
  config.handshake_timeout = options.handshake_timeout;
  config.connect_timeout = kUpstreamConnectTimeout;
  config.retry_connect = false;
  config.shed_unauthenticated = true;
  config.max_unauthenticated = options.max_pending_handshakes;
  config.max_unauthenticated_per_address = options.max_pending_per_address;
  config.make_handshake = [secret = std::move(secret)] { return std::make_unique<ServerHandshake>(secret); };
  config.thread_name = "acc-store-gate";
  config.on_event = [counters = counters_.get(), port = port_,
                     on_refused = std::move(options.on_refused)](const RelayEvent& event) {
    if (event.kind == RelayEvent::Kind::kHandshakeSucceeded) {
      ++counters->admitted;
    } else if (event.kind == RelayEvent::Kind::kHandshakeFailed) {
      if (counters->refused++ == 0 && on_refused) {
        on_refused("acc: rank 0's store gate on port " + std::to_string(port) + " refused a connection from " +
                   event.peer + ": " + event.text + ". (Further refusals are counted, not reported.)");
      }
    }
    // kConnectFailed (the store itself unreachable): the client sees its connection closed after
    // the handshake, and rank 0 has failed in its own way.
  };
  loop_ = std::make_unique<RelayLoop>(std::move(config));
}

StoreGate::~StoreGate() = default;  // the loop first (declared last): its thread uses the counters

std::size_t StoreGate::connections() const { return loop_->connections(); }

// --- the relay -----------------------------------------------------------------------------------

StoreRelay::StoreRelay(const std::string& gate_host, int gate_port, std::string secret, RelayOptions options)
    : gate_(gate_host + ":" + std::to_string(gate_port)), state_(std::make_unique<State>()) {
  check_store_secret(secret);
  RelayLoopConfig config;
  config.target = resolve_tcp(gate_host, gate_port);
  config.listener = listen_loopback();
  port_ = local_port(config.listener.get());
  config.target_name = "rank 0's store gate at " + gate_;
  config.handshake_leg = RelayLoopConfig::HandshakeLeg::kConnected;
  config.handshake_timeout = options.handshake_timeout;
  config.connect_timeout = options.connect_timeout;
  config.retry_connect = true;
  config.make_handshake = [secret = std::move(secret), gate = gate_] {
    return std::make_unique<ClientHandshake>(secret, gate);
  };
  config.admit = [](int fd) { return refuse_unless_own_process(fd); };
  config.thread_name = "acc-store-relay";
  config.on_event = [state = state_.get(), port = port_,
                     on_refused = std::move(options.on_refused)](const RelayEvent& event) {
    switch (event.kind) {
      case RelayEvent::Kind::kNotAdmitted:
        if (state->refused++ == 0 && on_refused) {
          on_refused("acc: this rank's store relay on 127.0.0.1:" + std::to_string(port) +
                     " refused a connection: " + event.text +
                     ". It carries only this process's own store connections. (Further refusals are counted, "
                     "not reported.)");
        }
        return;
      case RelayEvent::Kind::kConnectRetrying: {
        const std::lock_guard<std::mutex> lock(state->mutex);
        state->last_connect_error = event.text;
        return;
      }
      case RelayEvent::Kind::kHandshakeSucceeded:
      case RelayEvent::Kind::kHandshakeFailed:
      case RelayEvent::Kind::kConnectFailed:
      case RelayEvent::Kind::kLoopFailed: {
        const bool succeeded = event.kind == RelayEvent::Kind::kHandshakeSucceeded;
        {
          const std::lock_guard<std::mutex> lock(state->mutex);
          if (!succeeded && !state->first_failure) state->first_failure = event.text;
          if (!state->first_outcome) state->first_outcome = succeeded;
        }
        state->ended.notify_all();
        return;
      }
    }
  };
  loop_ = std::make_unique<RelayLoop>(std::move(config));
}

StoreRelay::~StoreRelay() = default;  // the loop first (declared last): its thread uses the state

std::size_t StoreRelay::connections() const { return loop_->connections(); }

std::optional<std::string> StoreRelay::wait_for_handshake(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->ended.wait_for(lock, timeout, [&] { return state_->first_outcome.has_value(); });
  if (state_->first_outcome) {
    if (*state_->first_outcome) return std::nullopt;
    return state_->first_failure;
  }
  std::string text =
      "no connection through this rank's store relay finished its handshake with rank 0's store gate at " + gate_ +
      " within " + seconds_text(timeout);
  if (!state_->last_connect_error.empty()) text += "; the last attempt failed " + state_->last_connect_error;
  return text;
}

std::optional<std::string> StoreRelay::check(std::chrono::milliseconds timeout) const {
  Fd probe(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port_));
  int rc;
  do {
    rc = connect(probe.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    return "this rank's store relay on 127.0.0.1:" + std::to_string(port_) + " cannot be reached: " + errno_text(errno);
  }
  return wait_for_handshake(timeout);  // `probe` closes after it
}

std::optional<std::string> StoreRelay::failure() const {
  const std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->first_failure;
}

}  // namespace acc::detail

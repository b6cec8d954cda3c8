#include "comm/gate/store_gate.h"

#include "comm/gate/gate_handshake.h"
#include "comm/gate/hmac_sha256.h"
#include "comm/gate/store_server.h"

namespace acc::detail {

std::string new_store_secret() { return to_hex(random_bytes(32)); }

StoreGate::StoreGate(int listen_fd, std::string secret, GateOptions options) : counters_(std::make_unique<Counters>()) {
  Fd listener(listen_fd);  // owned from here on: closed on every path out
  check_store_secret(secret);
  port_ = local_port(listener.get());

  StoreServerConfig config;
  config.listener = std::move(listener);
  config.handshake_timeout = options.handshake_timeout;
  config.max_unauthenticated = options.max_pending_handshakes;
  config.max_unauthenticated_per_address = options.max_pending_per_address;
  config.make_handshake = [secret = std::move(secret)] { return std::make_unique<ServerHandshake>(secret); };
  config.thread_name = "acc-store-gate";
  config.on_event = [counters = counters_.get(), port = port_,
                     on_refused = std::move(options.on_refused)](const StoreServerEvent& event) {
    switch (event.kind) {
      case StoreServerEvent::Kind::kHandshakeSucceeded:
        ++counters->admitted;
        return;
      case StoreServerEvent::Kind::kHandshakeFailed:
      case StoreServerEvent::Kind::kProtocolError:
        if (counters->refused++ == 0 && on_refused) {
          on_refused("acc: rank 0's store gate on port " + std::to_string(port) + " refused a connection from " +
                     event.peer + ": " + event.text + ". (Further refusals are counted, not reported.)");
        }
        return;
      case StoreServerEvent::Kind::kLoopFailed:
        // The store is gone: every rank sees its connection closed and names rank 0's store.
        return;
    }
  };
  server_ = std::make_unique<StoreServer>(std::move(config));
}

StoreGate::~StoreGate() = default;  // the server first (declared last): its thread uses the counters

std::size_t StoreGate::connections() const { return server_->connections(); }
std::size_t StoreGate::parked() const { return server_->parked(); }
std::size_t StoreGate::keys() const { return server_->keys(); }
Fd StoreGate::adopt_local() { return server_->adopt_local(); }

}  // namespace acc::detail

#pragma once
// The store gate's challenge-response (comm/gate/store_gate.h), as pure state machines over bytes: the
// event loop (comm/gate/store_server.h) feeds them what a socket gave and sends what they return, so the
// protocol is tested here without sockets. Torch-free.
//
// The protocol, version 2 (all lengths fixed; sn, cn: 32 random bytes from getrandom(2)):
//   server -> client  "acc-gate-2" sn                                           (42 bytes)
//   client -> server  cn  HMAC(secret, "acc-gate-2 client" sn cn)               (64 bytes)
//   server -> client  0x01 HMAC(secret, "acc-gate-2 server" sn cn)              (33 bytes)
//                  or 0x00, then the server closes (the client's MAC was wrong)
// after which the connection carries store requests (comm/gate/store_protocol.h). Both sides prove they
// know the secret: the client before the server reads a request, the server before the client
// sends one (an impostor on rank 0's address learns nothing). The nonces make every
// proof fresh (a recorded one does not replay) and the labels keep a proof from one direction
// from being reflected as the other. The connection is authenticated, not encrypted: whoever can
// read or alter the traffic on the path still can.
#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

namespace acc::detail {

namespace gate_protocol {
// Version 2: the store behind the gate is acc's own (comm/gate/store_protocol.h), not c10d's.
inline constexpr std::string_view kMagic = "acc-gate-2";
inline constexpr std::string_view kFamily = "acc-gate-";  // every version's greeting begins so
inline constexpr std::string_view kClientLabel = "acc-gate-2 client";
inline constexpr std::string_view kServerLabel = "acc-gate-2 server";
inline constexpr std::size_t kNonceBytes = 32;
inline constexpr std::size_t kMacBytes = 32;
inline constexpr std::size_t kGreetingBytes = kMagic.size() + kNonceBytes;
inline constexpr std::size_t kClientProofBytes = kNonceBytes + kMacBytes;
inline constexpr char kAccepted = '\x01';
inline constexpr char kRefused = '\x00';
/// A secret shorter than this is refused: a recorded handshake lets an eavesdropper test guesses
/// offline.
inline constexpr std::size_t kMinSecretBytes = 16;
}  // namespace gate_protocol

/// n bytes from getrandom(2) (the kernel's CSPRNG). Throws acc::Error if the kernel gives none.
std::string random_bytes(std::size_t n);

/// Throws acc::ConfigError, naming ACC_STORE_SECRET and how to make a good one, when `secret` is
/// shorter than gate_protocol::kMinSecretBytes.
void check_store_secret(const std::string& secret);

/// One side of a handshake. The loop sends opening() first, then repeatedly reads exactly needed()
/// bytes and hands them to consume(), sending the reply it returns, until the state is kDone (the
/// connection now carries the store's bytes) or kFailed (the loop sends the reply, if any, and
/// closes the connection).
class Handshake {
 public:
  enum class State { kMore, kDone, kFailed };
  struct Step {
    std::string reply;
    State state = State::kMore;
    std::string error;  // kFailed: why, in words for the user
  };

  virtual ~Handshake() = default;
  /// What this side sends before reading anything (the server's greeting; empty for the client).
  virtual std::string opening() = 0;
  /// Bytes the next consume() needs; > 0 until the handshake is over.
  virtual std::size_t needed() const = 0;
  /// Takes exactly needed() bytes.
  virtual Step consume(std::string_view bytes) = 0;
  /// Why the handshake failed when the peer closed the connection before it was over, having sent
  /// `partial` of the needed() bytes.
  virtual std::string failure_on_close(std::size_t partial) const = 0;
  /// Why the handshake failed when the peer did not finish it within `timeout`.
  virtual std::string failure_on_timeout(std::chrono::milliseconds timeout, std::size_t partial) const = 0;
  /// Whether a close by the peer at this point may be worth a new connection (a gate sheds the
  /// oldest unfinished handshakes under a flood) rather than a refusal.
  virtual bool retry_after_close() const { return false; }
};

/// The gate's side: greets with a nonce, checks the client's MAC, proves its own.
class ServerHandshake final : public Handshake {
 public:
  explicit ServerHandshake(std::string secret);
  std::string opening() override;
  std::size_t needed() const override;
  Step consume(std::string_view bytes) override;
  std::string failure_on_close(std::size_t partial) const override;
  std::string failure_on_timeout(std::chrono::milliseconds timeout, std::size_t partial) const override;

 private:
  std::string secret_;
  std::string server_nonce_;
  bool done_ = false;
};

/// A rank's side: checks the greeting, proves the secret, checks the gate's proof. `gate` (host:port)
/// names the server in the errors.
class ClientHandshake final : public Handshake {
 public:
  ClientHandshake(std::string secret, std::string gate);
  std::string opening() override;
  std::size_t needed() const override;
  Step consume(std::string_view bytes) override;
  std::string failure_on_close(std::size_t partial) const override;
  std::string failure_on_timeout(std::chrono::milliseconds timeout, std::size_t partial) const override;
  /// True after this side's proof and before the verdict: a gate refuses a wrong secret with a
  /// verdict, so a close here is a shed connection (or rank 0 exiting, which the retries outlast).
  bool retry_after_close() const override;

 private:
  enum class Expect { kGreeting, kVerdict, kServerMac, kNothing };
  std::string secret_;
  std::string gate_;
  std::string server_nonce_;
  std::string client_nonce_;
  Expect expect_ = Expect::kGreeting;
};

}  // namespace acc::detail

#include "comm/gate/gate_handshake.h"

#include <sys/random.h>

#include <acc/errors.h>
#include <cerrno>
#include <cstring>

#include "comm/gate/hmac_sha256.h"

namespace acc::detail {

namespace gp = gate_protocol;

namespace {

std::string_view bytes_of(const Sha256Digest& digest) {
  return {reinterpret_cast<const char*>(digest.data()), digest.size()};
}

bool same_bytes(std::string_view a, std::string_view b) {
  return a.size() == b.size() && constant_time_equal(reinterpret_cast<const uint8_t*>(a.data()),
                                                     reinterpret_cast<const uint8_t*>(b.data()), a.size());
}

std::string client_mac(const std::string& secret, std::string_view sn, std::string_view cn) {
  return std::string(bytes_of(hmac_sha256(secret, {gp::kClientLabel, sn, cn})));
}

std::string server_mac(const std::string& secret, std::string_view sn, std::string_view cn) {
  return std::string(bytes_of(hmac_sha256(secret, {gp::kServerLabel, sn, cn})));
}

std::string seconds_text(std::chrono::milliseconds timeout) {
  const auto ms = timeout.count();
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
}

// The first bytes a non-gate server sent, shown printable (a wrong port usually speaks text).
std::string shown(std::string_view bytes) {
  std::string text;
  for (unsigned char c : bytes.substr(0, 16)) {
    if (c >= 0x20 && c < 0x7f) {
      text.push_back(static_cast<char>(c));
    } else {
      static constexpr char kDigits[] = "0123456789abcdef";
      text += "\\x";
      text.push_back(kDigits[c >> 4]);
      text.push_back(kDigits[c & 0xF]);
    }
  }
  return "\"" + text + "\"";
}

}  // namespace

std::string random_bytes(std::size_t n) {
  std::string bytes(n, '\0');
  std::size_t filled = 0;
  while (filled < n) {
    const ssize_t got = getrandom(bytes.data() + filled, n - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw Error(std::string("acc: the kernel gave no random bytes (getrandom: ") + std::strerror(errno) +
                  "); the store secret and the gate's nonces need them. Is this a Linux older than 3.17?");
    }
    filled += static_cast<std::size_t>(got);
  }
  return bytes;
}

void check_store_secret(const std::string& secret) {
  if (secret.size() >= gp::kMinSecretBytes) return;
  throw ConfigError("acc: the store secret (ACC_STORE_SECRET) is " + std::to_string(secret.size()) +
                    " characters; it must have at least " + std::to_string(gp::kMinSecretBytes) +
                    ", since a recorded handshake lets anyone test guesses offline. On one machine, unset it: "
                    "acc-launch makes a secret of its own for every one-machine job. A job on several machines "
                    "needs the same secret on each: export the same output of "
                    "`python3 -c 'import secrets; print(secrets.token_hex(32))'` on every machine.");
}

// --- the gate's side -----------------------------------------------------------------------------

ServerHandshake::ServerHandshake(std::string secret)
    : secret_(std::move(secret)), server_nonce_(random_bytes(gp::kNonceBytes)) {}

std::string ServerHandshake::opening() { return std::string(gp::kMagic) + server_nonce_; }

std::size_t ServerHandshake::needed() const { return done_ ? 0 : gp::kClientProofBytes; }

Handshake::Step ServerHandshake::consume(std::string_view bytes) {
  done_ = true;
  const std::string_view client_nonce = bytes.substr(0, gp::kNonceBytes);
  const std::string_view mac = bytes.substr(gp::kNonceBytes, gp::kMacBytes);
  if (!same_bytes(mac, client_mac(secret_, server_nonce_, client_nonce))) {
    return {std::string(1, gp::kRefused), State::kFailed,
            "its proof does not match this job's store secret: it is a rank started with another "
            "ACC_STORE_SECRET, or not an acc rank at all"};
  }
  return {gp::kAccepted + server_mac(secret_, server_nonce_, client_nonce), State::kDone, {}};
}

std::string ServerHandshake::failure_on_close(std::size_t partial) const {
  return "it closed the connection after " + std::to_string(partial) + " of the " +
         std::to_string(gp::kClientProofBytes) + " handshake bytes: not an acc rank of this version";
}

std::string ServerHandshake::failure_on_timeout(std::chrono::milliseconds timeout, std::size_t partial) const {
  return "it sent " + std::to_string(partial) + " of the " + std::to_string(gp::kClientProofBytes) +
         " handshake bytes within " + seconds_text(timeout) +
         ": not an acc rank of this version (a plain TCPStore client waits for an answer to its first "
         "request)";
}

// --- the client's side ---------------------------------------------------------------------------

ClientHandshake::ClientHandshake(std::string secret, std::string gate)
    : secret_(std::move(secret)), gate_(std::move(gate)), client_nonce_(random_bytes(gp::kNonceBytes)) {}

std::string ClientHandshake::opening() { return {}; }

std::size_t ClientHandshake::needed() const {
  switch (expect_) {
    case Expect::kGreeting:
      return gp::kGreetingBytes;
    case Expect::kVerdict:
      return 1;
    case Expect::kServerMac:
      return gp::kMacBytes;
    case Expect::kNothing:
      break;
  }
  return 0;
}

Handshake::Step ClientHandshake::consume(std::string_view bytes) {
  switch (expect_) {
    case Expect::kGreeting: {
      if (bytes.substr(0, gp::kMagic.size()) != gp::kMagic) {
        expect_ = Expect::kNothing;
        if (bytes.substr(0, gp::kFamily.size()) == gp::kFamily) {
          return {{},
                  State::kFailed,
                  "rank 0's store gate at " + gate_ + " speaks " +
                      shown(bytes.substr(0, gp::kMagic.size())) + " and this rank " + std::string(gp::kMagic) +
                      ": the ranks run different versions of acc. Build every rank's program against the "
                      "same acc"};
        }
        return {{},
                State::kFailed,
                "the server at " + gate_ + " is not an acc store gate (it began with " + shown(bytes) +
                    "): MASTER_ADDR/MASTER_PORT name another service, or rank 0 runs an acc without the gate"};
      }
      server_nonce_ = std::string(bytes.substr(gp::kMagic.size()));
      expect_ = Expect::kVerdict;
      return {client_nonce_ + client_mac(secret_, server_nonce_, client_nonce_), State::kMore, {}};
    }
    case Expect::kVerdict:
      if (bytes[0] != gp::kAccepted) {
        expect_ = Expect::kNothing;
        return {{},
                State::kFailed,
                "rank 0's store at " + gate_ +
                    " refused this rank's ACC_STORE_SECRET: it differs from rank 0's. Every rank of a job "
                    "needs the same secret: export the same ACC_STORE_SECRET on every machine before "
                    "starting acc-launch (or another launcher)"};
      }
      expect_ = Expect::kServerMac;
      return {{}, State::kMore, {}};
    case Expect::kServerMac:
      expect_ = Expect::kNothing;
      if (!same_bytes(bytes, server_mac(secret_, server_nonce_, client_nonce_))) {
        return {{},
                State::kFailed,
                "the server at " + gate_ +
                    " accepted this rank but could not prove that it knows ACC_STORE_SECRET: it is not this "
                    "job's rank 0 (another job's, or an impostor's on that address). None of this rank's "
                    "store traffic was sent to it"};
      }
      return {{}, State::kDone, {}};
    case Expect::kNothing:
      break;
  }
  return {{}, State::kFailed, "internal error: the store gate handshake was fed after it ended"};
}

std::string ClientHandshake::failure_on_close(std::size_t partial) const {
  switch (expect_) {
    case Expect::kGreeting:
      return "the server at " + gate_ + " closed the connection " +
             (partial == 0 ? std::string("without a greeting")
                           : "after " + std::to_string(partial) + " of the " + std::to_string(gp::kGreetingBytes) +
                                 " bytes of the store gate's greeting") +
             ": it is not an acc store gate, or it refused this connection (rank 0 shutting down)";
    case Expect::kVerdict:
      return "rank 0's store at " + gate_ +
             " closed the connection without answering this rank's proof of ACC_STORE_SECRET";
    default:
      return "rank 0's store at " + gate_ + " closed the connection during the handshake";
  }
}

bool ClientHandshake::retry_after_close() const { return expect_ == Expect::kVerdict; }

std::string ClientHandshake::failure_on_timeout(std::chrono::milliseconds timeout, std::size_t partial) const {
  if (expect_ == Expect::kGreeting) {
    return "the server at " + gate_ + " sent " + std::to_string(partial) + " of the " +
           std::to_string(gp::kGreetingBytes) + " bytes of the store gate's greeting within " + seconds_text(timeout) +
           ": it is not an acc store gate (a plain TCPStore server waits for its client to speak first), or "
           "rank 0 is overloaded";
  }
  return "rank 0's store at " + gate_ + " did not finish the handshake within " + seconds_text(timeout);
}

}  // namespace acc::detail

// The store gate's handshake (runtime/src/comm/gate/gate_handshake.h) as pure state machines: the two
// sides fed to each other, and each fed what an impostor would send.
#include <gtest/gtest.h>

#include <acc/errors.h>
#include <cctype>
#include <set>
#include <string>

#include "comm/gate/gate_handshake.h"
#include "comm/gate/hmac_sha256.h"
#include "comm/gate/store_gate.h"

namespace {

using acc::detail::ClientHandshake;
using acc::detail::Handshake;
using acc::detail::ServerHandshake;
namespace gp = acc::detail::gate_protocol;

const std::string kSecret = "0123456789abcdef0123456789abcdef";
const std::string kOtherSecret = "fedcba9876543210fedcba9876543210";

struct Outcome {
  Handshake::State server = Handshake::State::kMore;
  Handshake::State client = Handshake::State::kMore;
  std::string server_error, client_error;
  std::string client_sent;  // everything the client sent, for the impostor checks
};

// Runs the two sides against each other, each message cut to what the reader asks for.
Outcome run(Handshake& server, Handshake& client) {
  Outcome outcome;
  std::string to_client = server.opening();
  std::string to_server = client.opening();
  for (int rounds = 0; rounds < 10; ++rounds) {
    if (outcome.client == Handshake::State::kMore && to_client.size() >= client.needed() && client.needed() > 0) {
      const std::size_t n = client.needed();
      auto step = client.consume(std::string_view(to_client).substr(0, n));
      to_client.erase(0, n);
      to_server += step.reply;
      outcome.client_sent += step.reply;
      outcome.client = step.state;
      outcome.client_error = step.error;
    }
    if (outcome.server == Handshake::State::kMore && to_server.size() >= server.needed() && server.needed() > 0) {
      const std::size_t n = server.needed();
      auto step = server.consume(std::string_view(to_server).substr(0, n));
      to_server.erase(0, n);
      to_client += step.reply;
      outcome.server = step.state;
      outcome.server_error = step.error;
    }
  }
  return outcome;
}

TEST(GateHandshake, SameSecretSucceedsOnBothSides) {
  ServerHandshake server(kSecret);
  ClientHandshake client(kSecret, "main:29500");
  const Outcome outcome = run(server, client);
  EXPECT_EQ(outcome.server, Handshake::State::kDone) << outcome.server_error;
  EXPECT_EQ(outcome.client, Handshake::State::kDone) << outcome.client_error;
  EXPECT_EQ(server.needed(), 0U);
  EXPECT_EQ(client.needed(), 0U);
}

TEST(GateHandshake, WrongClientSecretIsRefusedAndTheClientSaysSo) {
  ServerHandshake server(kSecret);
  ClientHandshake client(kOtherSecret, "main:29500");
  const Outcome outcome = run(server, client);
  EXPECT_EQ(outcome.server, Handshake::State::kFailed);
  EXPECT_NE(outcome.server_error.find("does not match this job's store secret"), std::string::npos)
      << outcome.server_error;
  EXPECT_EQ(outcome.client, Handshake::State::kFailed);
  EXPECT_NE(outcome.client_error.find("rank 0's store at main:29500 refused this rank's ACC_STORE_SECRET"),
            std::string::npos)
      << outcome.client_error;
}

TEST(GateHandshake, ImpostorServerCannotProveTheSecret) {
  // The impostor greets and accepts anything, but cannot compute the server's MAC: it reflects the
  // client's own MAC back, or sends random bytes.
  for (const bool reflect : {true, false}) {
    ClientHandshake client(kSecret, "main:29500");
    const std::string greeting = std::string(gp::kMagic) + acc::detail::random_bytes(gp::kNonceBytes);
    const auto proof = client.consume(greeting);
    ASSERT_EQ(proof.state, Handshake::State::kMore);
    ASSERT_EQ(proof.reply.size(), gp::kClientProofBytes);
    ASSERT_EQ(client.consume(std::string(1, gp::kAccepted)).state, Handshake::State::kMore);
    const std::string fake = reflect ? proof.reply.substr(gp::kNonceBytes) : acc::detail::random_bytes(gp::kMacBytes);
    const auto verdict = client.consume(fake);
    EXPECT_EQ(verdict.state, Handshake::State::kFailed) << (reflect ? "reflected MAC" : "random MAC");
    EXPECT_NE(verdict.error.find("could not prove that it knows ACC_STORE_SECRET"), std::string::npos) << verdict.error;
  }
}

TEST(GateHandshake, ServerGreetingsAreFresh) {
  std::set<std::string> greetings;
  for (int i = 0; i < 16; ++i) greetings.insert(ServerHandshake(kSecret).opening());
  EXPECT_EQ(greetings.size(), 16U);
  for (const auto& greeting : greetings) {
    EXPECT_EQ(greeting.size(), gp::kGreetingBytes);
    EXPECT_EQ(greeting.substr(0, gp::kMagic.size()), gp::kMagic);
  }
}

TEST(GateHandshake, ClientRefusesAServerThatIsNotAGate) {
  ClientHandshake client(kSecret, "main:29500");
  const std::string http = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
  const auto step = client.consume(http.substr(0, client.needed()));
  EXPECT_EQ(step.state, Handshake::State::kFailed);
  EXPECT_TRUE(step.reply.empty()) << "nothing is sent to a server that is not a gate";
  EXPECT_NE(step.error.find("the server at main:29500 is not an acc store gate (it began with \"HTTP/1.1 400 Bad"),
            std::string::npos)
      << step.error;
}

TEST(GateHandshake, ServerRefusesGarbage) {
  ServerHandshake server(kSecret);
  server.opening();
  const auto step = server.consume(std::string(gp::kClientProofBytes, 'x'));
  EXPECT_EQ(step.state, Handshake::State::kFailed);
  EXPECT_EQ(step.reply, std::string(1, gp::kRefused));
}

TEST(GateHandshake, TimeoutsAndClosesNameWhatWasMissing) {
  ServerHandshake server(kSecret);
  EXPECT_NE(server.failure_on_timeout(std::chrono::milliseconds(300), 5)
                .find("sent 5 of the 64 handshake bytes within 300 ms"),
            std::string::npos);
  ClientHandshake client(kSecret, "main:29500");
  EXPECT_NE(client.failure_on_timeout(std::chrono::seconds(10), 0)
                .find("sent 0 of the 42 bytes of the store gate's greeting within 10 s: it is not an acc store gate"),
            std::string::npos);
  EXPECT_NE(client.failure_on_close(0).find("closed the connection without a greeting"), std::string::npos);
}

TEST(StoreSecret, NewSecretsAreLongRandomHex) {
  const std::string a = acc::detail::new_store_secret();
  const std::string b = acc::detail::new_store_secret();
  EXPECT_EQ(a.size(), 64U);
  EXPECT_NE(a, b);
  for (char c : a)
    EXPECT_TRUE(std::isxdigit(static_cast<unsigned char>(c)) && !std::isupper(static_cast<unsigned char>(c))) << a;
  EXPECT_NO_THROW(acc::detail::check_store_secret(a));
}

TEST(StoreSecret, ShortSecretIsAConfigErrorNamingTheVariableAndTheFix) {
  try {
    acc::detail::check_store_secret("hunter2");
    FAIL() << "a 7-character secret was accepted";
  } catch (const acc::ConfigError& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("ACC_STORE_SECRET) is 7 characters; it must have at least 16"), std::string::npos) << text;
    EXPECT_NE(text.find("secrets.token_hex(32)"), std::string::npos) << text;
    // What acc-launch does (launcher/src/rank_environment.cpp), said as it is: one-machine jobs only.
    EXPECT_NE(text.find("acc-launch makes a secret of its own for every one-machine job"), std::string::npos) << text;
    EXPECT_EQ(text.find("makes one for every job"), std::string::npos) << text;
  }
}

}  // namespace

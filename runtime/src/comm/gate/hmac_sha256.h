#pragma once
// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104) for the store gate's challenge-response
// (comm/gate/gate_handshake.h). Written here rather than taken from OpenSSL: libacc links no libssl, and
// the gate hashes a few hundred bytes per connection. Torch-free.
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace acc::detail {

using Sha256Digest = std::array<uint8_t, 32>;

/// Incremental SHA-256: update() any number of times, then finish() once.
class Sha256 {
 public:
  static constexpr std::size_t kBlockBytes = 64;

  Sha256();
  void update(std::string_view data);
  /// The digest of everything given to update(). The object must not be used afterwards.
  Sha256Digest finish();

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, kBlockBytes> buffer_{};
  std::size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

Sha256Digest sha256(std::string_view data);

/// HMAC-SHA256 of the concatenation of `parts` (the handshake MACs a label and two nonces without
/// building the concatenation). Keys longer than a block are hashed first, as RFC 2104 says.
Sha256Digest hmac_sha256(std::string_view key, std::initializer_list<std::string_view> parts);
inline Sha256Digest hmac_sha256(std::string_view key, std::string_view message) { return hmac_sha256(key, {message}); }

/// Whether a and b (same length n) are equal, in time that depends on n only: a MAC compared with
/// memcmp tells an attacker how many leading bytes of a guess were right.
bool constant_time_equal(const uint8_t* a, const uint8_t* b, std::size_t n);

/// Lowercase hex of the bytes (test output, secrets).
std::string to_hex(std::string_view bytes);
inline std::string to_hex(const Sha256Digest& digest) {
  return to_hex(std::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
}

}  // namespace acc::detail

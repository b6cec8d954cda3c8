#include "comm/gate/hmac_sha256.h"

#include <algorithm>
#include <cstring>

namespace acc::detail {

namespace {
// FIPS 180-4, 4.2.2: the first 32 bits of the fractional parts of the cube roots of the first 64
// primes.
constexpr std::array<uint32_t, 64> kRound = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

// FIPS 180-4, 5.3.3: the first 32 bits of the fractional parts of the square roots of the first 8
// primes.
constexpr std::array<uint32_t, 8> kInitial = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                              0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

constexpr uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
}  // namespace

Sha256::Sha256() : state_(kInitial) {}

void Sha256::compress(const uint8_t* block) {
  std::array<uint32_t, 64> w{};
  for (int t = 0; t < 16; ++t) {  // the block is big-endian
    w[t] = (uint32_t{block[4 * t]} << 24) | (uint32_t{block[4 * t + 1]} << 16) | (uint32_t{block[4 * t + 2]} << 8) |
           uint32_t{block[4 * t + 3]};
  }
  for (int t = 16; t < 64; ++t) {
    const uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
    const uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }
  uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
  uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
  for (int t = 0; t < 64; ++t) {
    const uint32_t sum1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
    const uint32_t choose = (e & f) ^ (~e & g);
    const uint32_t t1 = h + sum1 + choose + kRound[t] + w[t];
    const uint32_t sum0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
    const uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
    const uint32_t t2 = sum0 + majority;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state_[0] += a;
  state_[1] += b;
  state_[2] += c;
  state_[3] += d;
  state_[4] += e;
  state_[5] += f;
  state_[6] += g;
  state_[7] += h;
}

void Sha256::update(std::string_view data) {
  const auto* p = reinterpret_cast<const uint8_t*>(data.data());
  std::size_t n = data.size();
  total_bytes_ += n;
  if (buffered_ > 0) {
    const std::size_t take = std::min(n, kBlockBytes - buffered_);
    std::memcpy(buffer_.data() + buffered_, p, take);
    buffered_ += take;
    p += take;
    n -= take;
    if (buffered_ < kBlockBytes) return;
    compress(buffer_.data());
    buffered_ = 0;
  }
  for (; n >= kBlockBytes; p += kBlockBytes, n -= kBlockBytes) compress(p);
  std::memcpy(buffer_.data(), p, n);
  buffered_ = n;
}

Sha256Digest Sha256::finish() {
  // FIPS 180-4, 5.1.1: a 1 bit, zeros up to 56 mod 64 bytes, then the length in bits, big-endian.
  const uint64_t bits = total_bytes_ * 8;
  buffer_[buffered_++] = 0x80;
  if (buffered_ > kBlockBytes - 8) {
    std::memset(buffer_.data() + buffered_, 0, kBlockBytes - buffered_);
    compress(buffer_.data());
    buffered_ = 0;
  }
  std::memset(buffer_.data() + buffered_, 0, kBlockBytes - 8 - buffered_);
  for (int i = 0; i < 8; ++i) buffer_[kBlockBytes - 1 - i] = static_cast<uint8_t>(bits >> (8 * i));
  compress(buffer_.data());
  Sha256Digest digest{};
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 4; ++j) digest[4 * i + j] = static_cast<uint8_t>(state_[i] >> (24 - 8 * j));
  }
  return digest;
}

Sha256Digest sha256(std::string_view data) {
  Sha256 hash;
  hash.update(data);
  return hash.finish();
}

Sha256Digest hmac_sha256(std::string_view key, std::initializer_list<std::string_view> parts) {
  // RFC 2104: H((K ^ opad) || H((K ^ ipad) || message)), K zero-padded to a block (hashed first if
  // longer than one).
  std::array<uint8_t, Sha256::kBlockBytes> block_key{};
  if (key.size() > Sha256::kBlockBytes) {
    const Sha256Digest hashed = sha256(key);
    std::memcpy(block_key.data(), hashed.data(), hashed.size());
  } else {
    std::memcpy(block_key.data(), key.data(), key.size());
  }
  std::array<uint8_t, Sha256::kBlockBytes> pad{};
  const auto as_view = [](const auto& bytes) {
    return std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  };

  for (std::size_t i = 0; i < pad.size(); ++i) pad[i] = block_key[i] ^ 0x36;
  Sha256 inner;
  inner.update(as_view(pad));
  for (std::string_view part : parts) inner.update(part);
  const Sha256Digest inner_digest = inner.finish();

  for (std::size_t i = 0; i < pad.size(); ++i) pad[i] = block_key[i] ^ 0x5c;
  Sha256 outer;
  outer.update(as_view(pad));
  outer.update(as_view(inner_digest));
  return outer.finish();
}

bool constant_time_equal(const uint8_t* a, const uint8_t* b, std::size_t n) {
  // volatile keeps the compiler from turning the loop into an early-exit comparison.
  volatile uint8_t difference = 0;
  for (std::size_t i = 0; i < n; ++i) difference = difference | (a[i] ^ b[i]);
  return difference == 0;
}

std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (unsigned char byte : bytes) {
    hex.push_back(kDigits[byte >> 4]);
    hex.push_back(kDigits[byte & 0xF]);
  }
  return hex;
}

}  // namespace acc::detail

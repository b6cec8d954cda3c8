#include "checkpoint/crc32c.h"

#include <array>

namespace acc::detail {

namespace {
// Byte-at-a-time table of the reflected Castagnoli polynomial; records are small, this is enough.
constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1U) ? 0x82F63B78U : 0U);
    table[i] = crc;
  }
  return table;
}
constexpr auto kTable = make_table();
}  // namespace

uint32_t crc32c(std::string_view data) {
  uint32_t crc = 0xFFFFFFFFU;
  for (unsigned char byte : data) crc = kTable[(crc ^ byte) & 0xFFU] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFU;
}

uint32_t masked_crc32c(std::string_view data) {
  const uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8U;
}

}  // namespace acc::detail

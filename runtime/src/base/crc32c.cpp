#include "base/crc32c.h"

#include <array>
#include <cstring>

namespace acc::detail {

namespace {
// Byte-at-a-time table of the reflected Castagnoli polynomial: the portable path.
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

uint32_t table_update(uint32_t crc, const unsigned char* bytes, size_t size) {
  for (size_t i = 0; i < size; ++i) crc = kTable[(crc ^ bytes[i]) & 0xFFU] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
// The crc32 instruction computes exactly this polynomial, 8 bytes per instruction.
__attribute__((target("sse4.2"))) uint32_t hardware_update(uint32_t crc, const unsigned char* bytes, size_t size) {
  uint64_t wide = crc;
  for (; size >= 8; bytes += 8, size -= 8) {
    uint64_t word;
    std::memcpy(&word, bytes, 8);
    wide = __builtin_ia32_crc32di(wide, word);
  }
  crc = static_cast<uint32_t>(wide);
  for (; size > 0; ++bytes, --size) crc = __builtin_ia32_crc32qi(crc, *bytes);
  return crc;
}

const bool kHasHardwareCrc = __builtin_cpu_supports("sse4.2");
#endif

uint32_t update(uint32_t crc, const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
#if defined(__x86_64__)
  if (kHasHardwareCrc) return hardware_update(crc, bytes, size);
#endif
  return table_update(crc, bytes, size);
}
}  // namespace

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size) {
  return update(crc ^ 0xFFFFFFFFU, data, size) ^ 0xFFFFFFFFU;
}

uint32_t crc32c(std::string_view data) { return crc32c_extend(0, data.data(), data.size()); }

uint32_t masked_crc32c(std::string_view data) {
  const uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8U;
}

}  // namespace acc::detail

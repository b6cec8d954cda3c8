#pragma once
// CRC-32C (Castagnoli), the checksum of TFRecord framing in TensorBoard event files.
#include <cstdint>
#include <string_view>

namespace acc::detail {

uint32_t crc32c(std::string_view data);
/// TFRecord's masked form of a CRC (rotated and offset, so CRCs of CRCs stay well spread).
uint32_t masked_crc32c(std::string_view data);

}  // namespace acc::detail

#pragma once
// CRC-32C (Castagnoli): the checksum of TFRecord framing in TensorBoard event files, and of every
// checkpoint file save_state writes (checksums.h). On x86-64 with SSE 4.2 it runs on the CPU's crc32
// instruction at several GB/s, so verifying a checkpoint costs about what reading it from memory does.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace acc::detail {

uint32_t crc32c(std::string_view data);
/// The CRC of the bytes before `data` (`crc`, as crc32c returned it) extended by `data`: a file's
/// CRC computed block by block equals the CRC of the whole.
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size);
/// TFRecord's masked form of a CRC (rotated and offset, so CRCs of CRCs stay well spread).
uint32_t masked_crc32c(std::string_view data);

}  // namespace acc::detail

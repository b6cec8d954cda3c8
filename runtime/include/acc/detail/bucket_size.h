#pragma once
// Gradient bucket sizes are given in MiB, as torch's bucket_cap_mb is: one default for DDP's buckets
// and FSDP's flat units, and one conversion to bytes.
#include <cstdint>

namespace acc::detail {

/// torch DDP's default bucket_cap_mb; FSDP's flat units default to the same size.
inline constexpr double kDefaultBucketCapMb = 25.0;

/// Bytes in `mib` mebibytes (2^20 bytes each), rounded down.
constexpr int64_t mib_to_bytes(double mib) { return static_cast<int64_t>(mib * 1024 * 1024); }

}  // namespace acc::detail

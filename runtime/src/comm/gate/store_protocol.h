#pragma once
// The job store's request/response frames, spoken on a connection after the gate's handshake
// (comm/gate/gate_handshake.h). Rank 0 serves the keys itself inside the gate's loop
// (comm/gate/store_server.h), so no c10d TCPStore server, and no port without a handshake, exists in a
// job with a store secret. Pure functions over bytes (fuzzed and tested without sockets). Torch-free.
//
// One request in flight per connection; the server answers every request, a blocking one (GET,
// WAIT, MULTI_GET) when its keys exist or with kTimeout when its time is up. All integers are
// little-endian:
//   request   u32 length | u32 id | u8 op     | i64 number | strs keys | strs values
//   response  u32 length | u32 id | u8 status | i64 number | strs values
// where length counts what follows it and strs = u32 count, then count x (u32 size, bytes). One
// layout for every op keeps the codec small; which fields an op uses is checked on decode:
//
//   op           keys  values               number           answer (kOk)
//   kSet         1     1 (value)            -                -
//   kCompareSet  1     2 (expected, desired) -               values[0]: c10d's compareSet result
//   kGet         1     0                    timeout ms       values[0]
//   kAdd         1     0                    amount           number: the new value
//   kDelete      1     0                    -                number: 1 if it existed
//   kCheck       n     0                    -                number: 1 if all exist
//   kNumKeys     0     0                    -                number: the count
//   kWait        n     0                    timeout ms       -
//   kAppend      1     1                    -                -
//   kMultiGet    n     0                    timeout ms       values: one per key
//   kMultiSet    n     n                    -                -
// A timeout of 0 means none (c10d's kNoTimeout). kError carries its text in values[0].
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace acc::detail::store_protocol {

enum class Op : uint8_t {
  kSet = 1,
  kCompareSet,
  kGet,
  kAdd,
  kDelete,
  kCheck,
  kNumKeys,
  kWait,
  kAppend,
  kMultiGet,
  kMultiSet,
};
enum class Status : uint8_t { kOk = 0, kTimeout = 1, kError = 2 };

// Checked before anything is allocated for a frame. A key is a c10d key (PrefixStore paths); a
// value the largest thing acc stores (all_gather_strings of a rank's metadata, NCCL ids) with room.
inline constexpr std::size_t kMaxKeyBytes = 8 * 1024;
inline constexpr std::size_t kMaxValueBytes = 64u << 20;
inline constexpr std::size_t kMaxKeysPerRequest = 128 * 1024;
inline constexpr std::size_t kMaxFrameBytes = 128u << 20;
inline constexpr std::size_t kLengthBytes = 4;

struct Request {
  uint32_t id = 0;
  Op op = Op::kSet;
  int64_t number = 0;
  std::vector<std::string> keys;
  std::vector<std::string> values;
};

struct Response {
  uint32_t id = 0;
  Status status = Status::kOk;
  int64_t number = 0;
  std::vector<std::string> values;
};

/// A request (id 0: StoreConnection::call numbers it). `number` is an ADD's amount or a blocking
/// op's timeout in ms.
Request make_request(Op op, std::vector<std::string> keys, std::vector<std::string> values = {},
                     int64_t number = 0);

/// The op's name for errors ("GET").
const char* op_name(Op op);
/// Whether a request of this op waits for its keys (its number is a timeout).
bool blocks(Op op);

/// The frame of a request / a response, length prefix included.
std::string encode(const Request& request);
std::string encode(const Response& response);

enum class Decoded { kIncomplete, kDone, kBad };

/// Reads one frame from the front of `buffer`. kDone: `out` holds it and `consumed` its bytes.
/// kIncomplete: more bytes are needed (`consumed` 0; `wanted` is the whole frame's size when its
/// length is known, else 0). kBad: the bytes are not a valid frame or break a limit; `error` says
/// which (the connection must be closed: framing is lost).
Decoded decode(std::string_view buffer, Request& out, std::size_t& consumed, std::size_t& wanted,
               std::string& error);
Decoded decode(std::string_view buffer, Response& out, std::size_t& consumed, std::size_t& wanted,
               std::string& error);

}  // namespace acc::detail::store_protocol

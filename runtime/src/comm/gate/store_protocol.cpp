#include "comm/gate/store_protocol.h"

#include <cstring>
#include <limits>

namespace acc::detail::store_protocol {

namespace {

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void put_i64(std::string& out, int64_t v) {
  const auto u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((u >> (8 * i)) & 0xFF));
}

void put_strings(std::string& out, const std::vector<std::string>& strings) {
  put_u32(out, static_cast<uint32_t>(strings.size()));
  for (const std::string& s : strings) {
    put_u32(out, static_cast<uint32_t>(s.size()));
    out += s;
  }
}

std::size_t strings_size(const std::vector<std::string>& strings) {
  std::size_t size = 4;
  for (const std::string& s : strings) size += 4 + s.size();
  return size;
}

// A frame of `body_size` bytes after its length, with room for all of them: the values are copied
// once, into the frame (they can be megabytes).
std::string start_frame(std::size_t body_size) {
  std::string frame;
  frame.reserve(kLengthBytes + body_size);
  put_u32(frame, static_cast<uint32_t>(body_size));
  return frame;
}

// Reads the body of one frame; every read is bounds-checked, so a short or lying frame is kBad.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}

  bool u8(uint8_t& v) {
    if (left() < 1) return false;
    v = static_cast<uint8_t>(bytes_[at_++]);
    return true;
  }
  bool u32(uint32_t& v) {
    if (left() < 4) return false;
    v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(bytes_[at_ + i])) << (8 * i);
    at_ += 4;
    return true;
  }
  bool i64(int64_t& v) {
    if (left() < 8) return false;
    uint64_t u = 0;
    for (int i = 0; i < 8; ++i) u |= static_cast<uint64_t>(static_cast<uint8_t>(bytes_[at_ + i])) << (8 * i);
    at_ += 8;
    v = static_cast<int64_t>(u);
    return true;
  }
  // A count checked against both the limit and the bytes left (each string needs 4), so a lying
  // count allocates nothing.
  bool strings(std::vector<std::string>& out, std::size_t max_count, std::size_t max_size, const char* what,
               std::string& error) {
    uint32_t count = 0;
    if (!u32(count)) return short_frame(error);
    if (count > max_count || static_cast<std::size_t>(count) * 4 > left()) {
      error = std::string("a frame announces ") + std::to_string(count) + " " + what + " (at most " +
              std::to_string(max_count) + ", and no more than its bytes can hold)";
      return false;
    }
    out.clear();
    out.reserve(count);
    for (uint32_t i = 0; i < count; ++i) {
      uint32_t size = 0;
      if (!u32(size)) return short_frame(error);
      if (size > max_size) {
        error = std::string("a frame holds one of its ") + what + " of " + std::to_string(size) + " bytes (at most " +
                std::to_string(max_size) + ")";
        return false;
      }
      if (size > left()) return short_frame(error);
      out.emplace_back(bytes_.substr(at_, size));
      at_ += size;
    }
    return true;
  }
  bool done(std::string& error) {
    if (left() == 0) return true;
    error = "a frame has " + std::to_string(left()) + " bytes after its last field";
    return false;
  }
  static bool short_frame(std::string& error) {
    error = "a frame ends inside one of its fields";
    return false;
  }

 private:
  std::size_t left() const { return bytes_.size() - at_; }
  std::string_view bytes_;
  std::size_t at_ = 0;
};

// The frame at the front of `buffer`: its body, or why not (yet).
Decoded frame_body(std::string_view buffer, std::string_view& body, std::size_t& consumed, std::size_t& wanted,
                   std::string& error) {
  consumed = 0;
  wanted = 0;
  if (buffer.size() < kLengthBytes) return Decoded::kIncomplete;
  uint32_t length = 0;
  Reader(buffer.substr(0, kLengthBytes)).u32(length);
  if (length > kMaxFrameBytes) {
    error = "a frame of " + std::to_string(length) + " bytes (at most " + std::to_string(kMaxFrameBytes) + ")";
    return Decoded::kBad;
  }
  wanted = kLengthBytes + length;
  if (buffer.size() < wanted) return Decoded::kIncomplete;
  body = buffer.substr(kLengthBytes, length);
  consumed = wanted;
  return Decoded::kDone;
}

// One frame into `out` when `read_body` accepts all of its body; `out` is untouched otherwise.
template <typename Message, typename ReadBody>
Decoded decode_frame(std::string_view buffer, Message& out, std::size_t& consumed, std::size_t& wanted,
                     std::string& error, ReadBody read_body) {
  std::string_view body;
  const Decoded framing = frame_body(buffer, body, consumed, wanted, error);
  if (framing != Decoded::kDone) return framing;
  consumed = 0;
  Reader in(body);
  Message message;
  if (!read_body(in, message, error)) return Decoded::kBad;
  out = std::move(message);
  consumed = wanted;
  return Decoded::kDone;
}

bool arity_ok(const Request& r, std::string& error) {
  const std::size_t k = r.keys.size();
  const std::size_t v = r.values.size();
  bool ok = false;
  switch (r.op) {
    case Op::kSet:
    case Op::kAppend:
      ok = k == 1 && v == 1;
      break;
    case Op::kCompareSet:
      ok = k == 1 && v == 2;
      break;
    case Op::kGet:
    case Op::kAdd:
    case Op::kDelete:
      ok = k == 1 && v == 0;
      break;
    case Op::kCheck:
    case Op::kWait:
    case Op::kMultiGet:
      ok = v == 0;
      break;
    case Op::kNumKeys:
      ok = k == 0 && v == 0;
      break;
    case Op::kMultiSet:
      ok = k == v;
      break;
  }
  if (ok && blocks(r.op) && r.number < 0) {
    error = std::string("a ") + op_name(r.op) + " request with a negative timeout";
    return false;
  }
  if (!ok) {
    error = std::string("a ") + op_name(r.op) + " request with " + std::to_string(k) + " keys and " +
            std::to_string(v) + " values";
  }
  return ok;
}

}  // namespace

Request make_request(Op op, std::vector<std::string> keys, std::vector<std::string> values, int64_t number) {
  Request r;
  r.op = op;
  r.number = number;
  r.keys = std::move(keys);
  r.values = std::move(values);
  return r;
}

const char* op_name(Op op) {
  switch (op) {
    case Op::kSet: return "SET";
    case Op::kCompareSet: return "COMPARE_SET";
    case Op::kGet: return "GET";
    case Op::kAdd: return "ADD";
    case Op::kDelete: return "DELETE";
    case Op::kCheck: return "CHECK";
    case Op::kNumKeys: return "NUM_KEYS";
    case Op::kWait: return "WAIT";
    case Op::kAppend: return "APPEND";
    case Op::kMultiGet: return "MULTI_GET";
    case Op::kMultiSet: return "MULTI_SET";
  }
  return "?";
}

bool blocks(Op op) { return op == Op::kGet || op == Op::kWait || op == Op::kMultiGet; }

std::string encode(const Request& request) {
  std::string frame = start_frame(4 + 1 + 8 + strings_size(request.keys) + strings_size(request.values));
  put_u32(frame, request.id);
  frame.push_back(static_cast<char>(request.op));
  put_i64(frame, request.number);
  put_strings(frame, request.keys);
  put_strings(frame, request.values);
  return frame;
}

std::string encode(const Response& response) {
  std::string frame = start_frame(4 + 1 + 8 + strings_size(response.values));
  put_u32(frame, response.id);
  frame.push_back(static_cast<char>(response.status));
  put_i64(frame, response.number);
  put_strings(frame, response.values);
  return frame;
}

Decoded decode(std::string_view buffer, Request& out, std::size_t& consumed, std::size_t& wanted,
               std::string& error) {
  return decode_frame(buffer, out, consumed, wanted, error, [](Reader& in, Request& r, std::string& why) {
    uint8_t op = 0;
    if (!in.u32(r.id) || !in.u8(op) || !in.i64(r.number)) return Reader::short_frame(why);
    if (op < static_cast<uint8_t>(Op::kSet) || op > static_cast<uint8_t>(Op::kMultiSet)) {
      why = "a request with the unknown op " + std::to_string(op);
      return false;
    }
    r.op = static_cast<Op>(op);
    return in.strings(r.keys, kMaxKeysPerRequest, kMaxKeyBytes, "keys", why) &&
           in.strings(r.values, kMaxKeysPerRequest, kMaxValueBytes, "values", why) && in.done(why) &&
           arity_ok(r, why);
  });
}

Decoded decode(std::string_view buffer, Response& out, std::size_t& consumed, std::size_t& wanted,
               std::string& error) {
  return decode_frame(buffer, out, consumed, wanted, error, [](Reader& in, Response& r, std::string& why) {
    uint8_t status = 0;
    if (!in.u32(r.id) || !in.u8(status) || !in.i64(r.number)) return Reader::short_frame(why);
    if (status > static_cast<uint8_t>(Status::kError)) {
      why = "a response with the unknown status " + std::to_string(status);
      return false;
    }
    r.status = static_cast<Status>(status);
    return in.strings(r.values, kMaxKeysPerRequest, kMaxValueBytes, "values", why) && in.done(why);
  });
}

}  // namespace acc::detail::store_protocol

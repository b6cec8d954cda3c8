// The job store's frames (runtime/src/comm/gate/store_protocol.h): every op round-trips, a frame split
// anywhere is incomplete until its last byte, and what breaks the layout or a limit is refused
// without allocating for it, including random corruptions of valid frames.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "comm/gate/store_protocol.h"

namespace {

namespace sp = acc::detail::store_protocol;

sp::Request make(sp::Op op, std::vector<std::string> keys, std::vector<std::string> values, int64_t number) {
  sp::Request r = sp::make_request(op, std::move(keys), std::move(values), number);
  r.id = 0xA1B2C3D4;
  return r;
}

std::vector<sp::Request> one_of_each() {
  const std::string binary("\x00\xff\x01 value", 9);
  return {make(sp::Op::kSet, {"acc/job"}, {binary}, 0),
          make(sp::Op::kCompareSet, {"k"}, {"", "desired"}, 0),
          make(sp::Op::kGet, {"k"}, {}, 30000),
          make(sp::Op::kAdd, {"counter"}, {}, -5),
          make(sp::Op::kDelete, {"k"}, {}, 0),
          make(sp::Op::kCheck, {"a", "b", ""}, {}, 0),
          make(sp::Op::kNumKeys, {}, {}, 0),
          make(sp::Op::kWait, {"a", "b"}, {}, 0),
          make(sp::Op::kAppend, {"log"}, {"more"}, 0),
          make(sp::Op::kMultiGet, {"a", "b"}, {}, 1),
          make(sp::Op::kMultiSet, {"a", "b"}, {"1", "2"}, 0)};
}

TEST(StoreProtocol, EveryRequestRoundTripsAndIsIncompleteUntilItsLastByte) {
  for (const sp::Request& request : one_of_each()) {
    const std::string frame = sp::encode(request);
    for (std::size_t cut = 0; cut < frame.size(); ++cut) {
      sp::Request out;
      std::size_t consumed = 99;
      std::size_t wanted = 0;
      std::string error;
      ASSERT_EQ(sp::decode(std::string_view(frame).substr(0, cut), out, consumed, wanted, error),
                sp::Decoded::kIncomplete)
          << sp::op_name(request.op) << " cut at " << cut;
      EXPECT_EQ(consumed, 0U);
      if (cut >= sp::kLengthBytes) {
        EXPECT_EQ(wanted, frame.size());
      }
    }
    sp::Request out;
    std::size_t consumed = 0;
    std::size_t wanted = 0;
    std::string error;
    const std::string two = frame + frame;  // the next frame's bytes are left alone
    ASSERT_EQ(sp::decode(two, out, consumed, wanted, error), sp::Decoded::kDone) << error;
    EXPECT_EQ(consumed, frame.size());
    EXPECT_EQ(out.id, request.id);
    EXPECT_EQ(out.op, request.op);
    EXPECT_EQ(out.number, request.number);
    EXPECT_EQ(out.keys, request.keys);
    EXPECT_EQ(out.values, request.values);
  }
}

TEST(StoreProtocol, ResponsesRoundTrip) {
  sp::Response response;
  response.id = 7;
  response.status = sp::Status::kError;
  response.number = -1;
  response.values = {"the store's key 'x' does not hold a number", std::string(1000, '\0')};
  const std::string frame = sp::encode(response);
  sp::Response out;
  std::size_t consumed = 0;
  std::size_t wanted = 0;
  std::string error;
  ASSERT_EQ(sp::decode(frame, out, consumed, wanted, error), sp::Decoded::kDone) << error;
  EXPECT_EQ(out.id, 7U);
  EXPECT_EQ(out.status, sp::Status::kError);
  EXPECT_EQ(out.number, -1);
  EXPECT_EQ(out.values, response.values);
}

sp::Decoded decode_request(const std::string& frame, std::string& error) {
  sp::Request out;
  std::size_t consumed = 0;
  std::size_t wanted = 0;
  return sp::decode(frame, out, consumed, wanted, error);
}

// A frame's body with its length prefix.
std::string frame_of(const std::string& body) {
  std::string frame;
  for (int i = 0; i < 4; ++i) frame.push_back(static_cast<char>((body.size() >> (8 * i)) & 0xFF));
  return frame + body;
}

TEST(StoreProtocol, FramesBreakingTheLayoutOrALimitAreRefusedWithTheReason) {
  std::string error;
  // A length beyond the frame limit is refused from its 4 bytes alone.
  EXPECT_EQ(decode_request(std::string("\x00\x00\x00\x7f", 4), error), sp::Decoded::kBad);
  EXPECT_NE(error.find("bytes (at most"), std::string::npos) << error;

  // Fields an op does not take.
  EXPECT_EQ(decode_request(sp::encode(make(sp::Op::kSet, {"a", "b"}, {"1"}, 0)), error), sp::Decoded::kBad);
  EXPECT_NE(error.find("a SET request with 2 keys and 1 values"), std::string::npos) << error;
  EXPECT_EQ(decode_request(sp::encode(make(sp::Op::kMultiSet, {"a", "b"}, {"1"}, 0)), error), sp::Decoded::kBad);
  EXPECT_EQ(decode_request(sp::encode(make(sp::Op::kGet, {"a"}, {}, -1)), error), sp::Decoded::kBad);
  EXPECT_NE(error.find("negative timeout"), std::string::npos) << error;

  // An unknown op.
  std::string frame = sp::encode(make(sp::Op::kGet, {"a"}, {}, 0));
  frame[4 + 4] = 99;
  EXPECT_EQ(decode_request(frame, error), sp::Decoded::kBad);
  EXPECT_NE(error.find("unknown op 99"), std::string::npos) << error;

  // A count that the frame's bytes cannot hold: refused before reserving room for it.
  std::string body(4 + 1 + 8, '\0');
  body[4] = static_cast<char>(sp::Op::kCheck);
  body += std::string("\xff\xff\x01\x00", 4);  // 131,071 keys, in a frame of 17 bytes
  EXPECT_EQ(decode_request(frame_of(body), error), sp::Decoded::kBad);
  EXPECT_NE(error.find("announces 131071 keys"), std::string::npos) << error;

  // A key over the limit.
  EXPECT_EQ(decode_request(sp::encode(make(sp::Op::kGet, {std::string(sp::kMaxKeyBytes + 1, 'k')}, {}, 0)), error),
            sp::Decoded::kBad);
  EXPECT_NE(error.find("of 8193 bytes"), std::string::npos) << error;

  // Bytes after the last field.
  const std::string valid = sp::encode(make(sp::Op::kNumKeys, {}, {}, 0));
  EXPECT_EQ(decode_request(frame_of(valid.substr(4) + "x"), error), sp::Decoded::kBad);
  EXPECT_NE(error.find("1 bytes after its last field"), std::string::npos) << error;
}

// Random corruptions of valid frames: the decoder says kDone, kIncomplete or kBad, and names why
// when it refuses (fuzz/store_protocol_fuzzer.cpp runs the same under the sanitizers).
TEST(StoreProtocol, CorruptedFramesNeverCrashTheDecoder) {
  std::mt19937 rng(20261127);
  const auto frames = one_of_each();
  int bad = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string frame = sp::encode(frames[rng() % frames.size()]);
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) frame[rng() % frame.size()] = static_cast<char>(rng());
    if (rng() % 4 == 0) frame.resize(rng() % frame.size());
    std::string error;
    const sp::Decoded result = decode_request(frame, error);
    if (result == sp::Decoded::kBad) {
      ++bad;
      EXPECT_FALSE(error.empty());
    }
  }
  EXPECT_GT(bad, 1000) << "the corruptions were hardly ever caught";
}

}  // namespace

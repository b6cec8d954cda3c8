// libFuzzer target for the job store's frames (runtime/src/comm/gate/store_protocol.h) and the table
// that runs them (comm/gate/key_value_table.h): what an authenticated rank, or a corrupted connection,
// can send rank 0's store. The input is a stream of request frames, as the server reads one
// connection; the same bytes are also read as response frames, as a rank reads its answers.
//
// Beyond "no crash, no sanitizer report": a decoded frame encodes back to the same bytes, every
// request the table runs gets an answer with its id or names the key it waits for, and decoding
// never takes more than the bytes it was given.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "comm/gate/key_value_table.h"
#include "comm/gate/store_protocol.h"

namespace sp = acc::detail::store_protocol;

namespace {

void check(bool condition) {
  if (!condition) std::abort();
}

void fuzz_requests(std::string_view bytes) {
  acc::detail::KeyValueTable table;
  while (!bytes.empty()) {
    sp::Request request;
    std::size_t consumed = 0;
    std::size_t wanted = 0;
    std::string error;
    const sp::Decoded result = sp::decode(bytes, request, consumed, wanted, error);
    if (result == sp::Decoded::kBad) {
      check(!error.empty());
      return;
    }
    if (result == sp::Decoded::kIncomplete) {
      check(consumed == 0 && (wanted == 0 || wanted > bytes.size()));
      return;
    }
    check(consumed > 0 && consumed <= bytes.size());
    check(sp::encode(request) == bytes.substr(0, consumed));
    const auto outcome = table.execute(request);
    if (outcome.response) {
      check(outcome.response->id == request.id);
      const std::string answer = sp::encode(*outcome.response);
      sp::Response back;
      std::size_t answer_consumed = 0;
      check(sp::decode(answer, back, answer_consumed, wanted, error) == sp::Decoded::kDone);
      check(answer_consumed == answer.size() && back.values == outcome.response->values);
    } else {
      check(sp::blocks(request.op));  // only a get or a wait is left waiting
    }
    bytes.remove_prefix(consumed);
  }
}

void fuzz_responses(std::string_view bytes) {
  sp::Response response;
  std::size_t consumed = 0;
  std::size_t wanted = 0;
  std::string error;
  if (sp::decode(bytes, response, consumed, wanted, error) == sp::Decoded::kDone) {
    check(sp::encode(response) == bytes.substr(0, consumed));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  fuzz_requests(bytes);
  fuzz_responses(bytes);
  return 0;
}

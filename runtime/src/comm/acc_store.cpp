#include "comm/acc_store.h"

#include <c10/util/Exception.h>

#include <utility>

namespace acc::detail {

namespace sp = store_protocol;

namespace {

using std::chrono::milliseconds;

// A blocking op's answer comes at its timeout at the latest (the server answers kTimeout then);
// the margin is for the answer's way back on a loaded machine, after which the connection is
// given up. (A DeadlineStore on top bounds every call by the rendezvous deadline anyway.)
constexpr milliseconds kAnswerMargin{2000};

std::string duration_text(milliseconds timeout) {
  const auto ms = timeout.count();
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
}

std::string to_string(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }
std::vector<uint8_t> to_bytes(const std::string& text) { return {text.begin(), text.end()}; }

// "key \"a\"", "keys \"a\", \"b\" and 3 more": enough to find the rank that should have set them.
std::string keys_text(const std::vector<std::string>& keys) {
  constexpr std::size_t kShown = 3;
  std::string text = keys.size() == 1 ? "key " : "keys ";
  for (std::size_t i = 0; i < keys.size() && i < kShown; ++i) {
    if (i > 0) text += ", ";
    text += "\"" + keys[i] + "\"";
  }
  if (keys.size() > kShown) text += " and " + std::to_string(keys.size() - kShown) + " more";
  return text;
}

int64_t timeout_ms(const milliseconds& timeout) {
  if (timeout.count() < 0) {
    C10_THROW_ERROR(DistStoreError, "acc: a store wait with a negative timeout (" + std::to_string(timeout.count()) +
                                        " ms); give 0 (c10d::Store::kNoTimeout) to wait without one");
  }
  return timeout.count();
}

}  // namespace

AccStore::AccStore(std::shared_ptr<const Opener> open, milliseconds timeout)
    : c10d::Store(timeout), open_(std::move(open)), connection_((*open_)()) {}

c10::intrusive_ptr<c10d::Store> AccStore::clone() {
  try {
    return c10::make_intrusive<AccStore>(open_, timeout_);
  } catch (const acc::Error& e) {  // unreachable, refused, or rank 0's gate stopped
    const std::string why = e.what();
    C10_THROW_ERROR(DistNetworkError,
                    "acc: cannot clone the store: " + (why.rfind("acc: ", 0) == 0 ? why.substr(5) : why));
  }
}

sp::Response AccStore::call(sp::Request r, milliseconds wait) {
  const milliseconds answer_within = wait.count() == 0 ? milliseconds(0) : wait + kAnswerMargin;
  const std::string op = sp::op_name(r.op);
  const std::vector<std::string> keys = sp::blocks(r.op) ? r.keys : std::vector<std::string>{};
  sp::Response response;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    try {
      response = connection_.call(std::move(r), answer_within);
    } catch (const StoreConnectionLost& e) {
      C10_THROW_ERROR(DistNetworkError, e.what());
    } catch (const DistributedError& e) {  // a request beyond the protocol's limits
      C10_THROW_ERROR(DistStoreError, e.what());
    }
  }
  switch (response.status) {
    case sp::Status::kOk:
      return response;
    case sp::Status::kTimeout:
      C10_THROW_ERROR(DistStoreError,
                      "acc: Wait timeout: " + op + " of the store's " + keys_text(keys) + " found " +
                          (keys.size() == 1 ? "it" : "them") + " missing after " + duration_text(wait) +
                          " (the store's timeout): the rank that sets " + (keys.size() == 1 ? "it" : "them") +
                          " has not got there (it is slower, stuck or has failed), or the timeout is too short");
    case sp::Status::kError:
      C10_THROW_ERROR(DistStoreError,
                      "acc: " + connection_.name() + " refused a " + op + " request: " +
                          (response.values.empty() ? std::string("(no reason given)") : response.values[0]));
  }
  C10_THROW_ERROR(DistStoreError, "acc: unknown store status");
}

void AccStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  call(sp::make_request(sp::Op::kSet, {key}, {to_string(value)}), timeout_);
}

std::vector<uint8_t> AccStore::compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                          const std::vector<uint8_t>& desired) {
  const sp::Response r =
      call(sp::make_request(sp::Op::kCompareSet, {key}, {to_string(expected), to_string(desired)}), timeout_);
  return r.values.empty() ? std::vector<uint8_t>{} : to_bytes(r.values[0]);
}

std::vector<uint8_t> AccStore::get(const std::string& key) {
  const sp::Response r = call(sp::make_request(sp::Op::kGet, {key}, {}, timeout_ms(timeout_)), timeout_);
  return r.values.empty() ? std::vector<uint8_t>{} : to_bytes(r.values[0]);
}

int64_t AccStore::add(const std::string& key, int64_t value) {
  return call(sp::make_request(sp::Op::kAdd, {key}, {}, value), timeout_).number;
}

bool AccStore::deleteKey(const std::string& key) {
  return call(sp::make_request(sp::Op::kDelete, {key}), timeout_).number != 0;
}

bool AccStore::check(const std::vector<std::string>& keys) {
  return call(sp::make_request(sp::Op::kCheck, keys), timeout_).number != 0;
}

int64_t AccStore::getNumKeys() { return call(sp::make_request(sp::Op::kNumKeys, {}), timeout_).number; }

void AccStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void AccStore::wait(const std::vector<std::string>& keys, const milliseconds& timeout) {
  call(sp::make_request(sp::Op::kWait, keys, {}, timeout_ms(timeout)), timeout);
}

void AccStore::append(const std::string& key, const std::vector<uint8_t>& value) {
  call(sp::make_request(sp::Op::kAppend, {key}, {to_string(value)}), timeout_);
}

std::vector<std::vector<uint8_t>> AccStore::multiGet(const std::vector<std::string>& keys) {
  const sp::Response r = call(sp::make_request(sp::Op::kMultiGet, keys, {}, timeout_ms(timeout_)), timeout_);
  if (r.values.size() != keys.size()) {
    C10_THROW_ERROR(DistStoreError, "acc: " + connection_.name() + " answered a MULTI_GET of " +
                                        std::to_string(keys.size()) + " keys with " + std::to_string(r.values.size()) +
                                        " values");
  }
  std::vector<std::vector<uint8_t>> values;
  values.reserve(r.values.size());
  for (const std::string& v : r.values) values.push_back(to_bytes(v));
  return values;
}

void AccStore::multiSet(const std::vector<std::string>& keys, const std::vector<std::vector<uint8_t>>& values) {
  if (keys.size() != values.size()) {
    C10_THROW_ERROR(DistStoreError, "acc: multiSet was given " + std::to_string(keys.size()) + " keys and " +
                                        std::to_string(values.size()) + " values; they must pair up");
  }
  std::vector<std::string> texts;
  texts.reserve(values.size());
  for (const auto& v : values) texts.push_back(to_string(v));
  call(sp::make_request(sp::Op::kMultiSet, keys, std::move(texts)), timeout_);
}

}  // namespace acc::detail

#include "comm/gate/key_value_table.h"

#include <cerrno>
#include <cstdlib>

namespace acc::detail {

namespace sp = store_protocol;

namespace {

sp::Response ok(const sp::Request& request) {
  sp::Response response;
  response.id = request.id;
  return response;
}

sp::Response error(const sp::Request& request, std::string text) {
  sp::Response response = ok(request);
  response.status = sp::Status::kError;
  response.values.push_back(std::move(text));
  return response;
}

// c10d's counters are decimal text (std::stoll on the server): all of it a number, or nothing.
std::optional<int64_t> counter_value(const std::string& text) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size()) return std::nullopt;
  return static_cast<int64_t>(value);
}

}  // namespace

KeyValueTable::Outcome KeyValueTable::execute(const sp::Request& request) {
  Outcome outcome;
  const auto& keys = request.keys;
  const auto& values = request.values;
  switch (request.op) {
    case sp::Op::kSet:
      values_[keys[0]] = values[0];
      outcome.written.push_back(keys[0]);
      outcome.response = ok(request);
      break;
    case sp::Op::kCompareSet: {
      const auto found = values_.find(keys[0]);
      const std::string& expected = values[0];
      const std::string& desired = values[1];
      sp::Response response = ok(request);
      if (found == values_.end() ? expected.empty() : found->second == expected) {
        values_[keys[0]] = desired;
        outcome.written.push_back(keys[0]);
        response.values.push_back(desired);
      } else {
        // Missing with a non-empty expectation: c10d answers the expectation itself.
        response.values.push_back(found == values_.end() ? expected : found->second);
      }
      outcome.response = std::move(response);
      break;
    }
    case sp::Op::kAdd: {
      const auto found = values_.find(keys[0]);
      int64_t current = 0;  // a missing counter starts at 0
      if (found != values_.end()) {
        const auto parsed = counter_value(found->second);
        if (!parsed) {
          outcome.response = error(request, "the store's key '" + keys[0] +
                                                "' does not hold a number, so add() cannot count on it");
          break;
        }
        current = *parsed;
      }
      // Wraps as the two's-complement counter c10d's int64 arithmetic would, instead of overflowing.
      const int64_t next =
          static_cast<int64_t>(static_cast<uint64_t>(current) + static_cast<uint64_t>(request.number));
      values_[keys[0]] = std::to_string(next);
      outcome.written.push_back(keys[0]);
      sp::Response response = ok(request);
      response.number = next;
      outcome.response = std::move(response);
      break;
    }
    case sp::Op::kDelete: {
      sp::Response response = ok(request);
      response.number = values_.erase(keys[0]) > 0 ? 1 : 0;
      outcome.response = std::move(response);
      break;
    }
    case sp::Op::kCheck: {
      sp::Response response = ok(request);
      response.number = 1;
      for (const auto& key : keys) {
        if (values_.count(key) == 0) {
          response.number = 0;
          break;
        }
      }
      outcome.response = std::move(response);
      break;
    }
    case sp::Op::kNumKeys: {
      sp::Response response = ok(request);
      response.number = static_cast<int64_t>(values_.size());
      outcome.response = std::move(response);
      break;
    }
    case sp::Op::kAppend:
      values_[keys[0]] += values[0];
      outcome.written.push_back(keys[0]);
      outcome.response = ok(request);
      break;
    case sp::Op::kMultiSet:
      for (std::size_t i = 0; i < keys.size(); ++i) values_[keys[i]] = values[i];
      outcome.written = keys;
      outcome.response = ok(request);
      break;
    case sp::Op::kGet:
    case sp::Op::kWait:
    case sp::Op::kMultiGet: {
      for (const auto& key : keys) {
        if (values_.count(key) == 0) {
          outcome.waits_for = key;
          return outcome;
        }
      }
      sp::Response response = ok(request);
      if (request.op != sp::Op::kWait) {
        response.values.reserve(keys.size());
        for (const auto& key : keys) response.values.push_back(values_.at(key));
      }
      outcome.response = std::move(response);
      break;
    }
  }
  return outcome;
}

}  // namespace acc::detail

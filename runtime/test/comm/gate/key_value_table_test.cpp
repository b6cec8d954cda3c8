// The job store's table (runtime/src/comm/gate/key_value_table.h) with c10d's semantics, which Gloo and
// NCCL rely on without saying so: add keeps decimal text, compareSet's four cases, what a get
// waits for. (runtime/test/comm/acc_store_test.cpp compares the served store with c10d's HashStore.)
#include <gtest/gtest.h>

#include "comm/gate/key_value_table.h"

namespace {

namespace sp = acc::detail::store_protocol;
using acc::detail::KeyValueTable;

sp::Request make(sp::Op op, std::vector<std::string> keys, std::vector<std::string> values = {}, int64_t number = 0) {
  sp::Request r = sp::make_request(op, std::move(keys), std::move(values), number);
  r.id = 42;
  return r;
}

sp::Response answered(KeyValueTable& table, const sp::Request& request) {
  auto outcome = table.execute(request);
  EXPECT_TRUE(outcome.response.has_value()) << sp::op_name(request.op) << " waits for " << outcome.waits_for;
  if (!outcome.response) return {};
  EXPECT_EQ(outcome.response->id, 42U);
  return *outcome.response;
}

TEST(KeyValueTable, AddCountsInDecimalTextFromZero) {
  KeyValueTable table;
  EXPECT_EQ(answered(table, make(sp::Op::kAdd, {"n"}, {}, 3)).number, 3);
  EXPECT_EQ(answered(table, make(sp::Op::kAdd, {"n"}, {}, -10)).number, -7);
  EXPECT_EQ(answered(table, make(sp::Op::kGet, {"n"})).values, std::vector<std::string>{"-7"});
  answered(table, make(sp::Op::kSet, {"text"}, {"abc"}));
  const auto refused = answered(table, make(sp::Op::kAdd, {"text"}, {}, 1));
  EXPECT_EQ(refused.status, sp::Status::kError);
  EXPECT_NE(refused.values.at(0).find("'text' does not hold a number"), std::string::npos);
  answered(table, make(sp::Op::kSet, {"empty"}, {""}));
  EXPECT_EQ(answered(table, make(sp::Op::kAdd, {"empty"}, {}, 1)).status, sp::Status::kError)
      << "an empty value is not 0 (c10d's stoll refuses it)";
}

TEST(KeyValueTable, CompareSetFollowsC10dInItsFourCases) {
  KeyValueTable table;
  // Missing, expecting "": set.
  EXPECT_EQ(answered(table, make(sp::Op::kCompareSet, {"a"}, {"", "one"})).values.at(0), "one");
  // Missing, expecting something: not set, the expectation comes back.
  EXPECT_EQ(answered(table, make(sp::Op::kCompareSet, {"b"}, {"x", "two"})).values.at(0), "x");
  EXPECT_EQ(answered(table, make(sp::Op::kCheck, {"b"})).number, 0);
  // Present and equal: set.
  EXPECT_EQ(answered(table, make(sp::Op::kCompareSet, {"a"}, {"one", "uno"})).values.at(0), "uno");
  // Present and different: unchanged, the current value comes back.
  EXPECT_EQ(answered(table, make(sp::Op::kCompareSet, {"a"}, {"one", "eins"})).values.at(0), "uno");
  EXPECT_EQ(answered(table, make(sp::Op::kGet, {"a"})).values.at(0), "uno");
}

TEST(KeyValueTable, BlockingRequestsSayWhichKeyTheyWaitFor) {
  KeyValueTable table;
  answered(table, make(sp::Op::kSet, {"a"}, {"1"}));
  auto outcome = table.execute(make(sp::Op::kMultiGet, {"a", "b", "c"}, {}, 100));
  EXPECT_FALSE(outcome.response.has_value());
  EXPECT_EQ(outcome.waits_for, "b");
  answered(table, make(sp::Op::kSet, {"b"}, {"2"}));
  EXPECT_EQ(table.execute(make(sp::Op::kWait, {"a", "b", "c"})).waits_for, "c");
  answered(table, make(sp::Op::kAppend, {"c"}, {"3"}));  // append creates
  EXPECT_EQ(answered(table, make(sp::Op::kMultiGet, {"c", "a", "b"})).values,
            (std::vector<std::string>{"3", "1", "2"}));
  EXPECT_TRUE(answered(table, make(sp::Op::kWait, {"a", "c"})).values.empty());
}

TEST(KeyValueTable, WritesAreReportedForWakingWaiters) {
  KeyValueTable table;
  EXPECT_EQ(table.execute(make(sp::Op::kSet, {"a"}, {"1"})).written, std::vector<std::string>{"a"});
  EXPECT_EQ(table.execute(make(sp::Op::kAdd, {"n"}, {}, 1)).written, std::vector<std::string>{"n"});
  EXPECT_EQ(table.execute(make(sp::Op::kMultiSet, {"x", "y"}, {"1", "2"})).written,
            (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(table.execute(make(sp::Op::kCompareSet, {"a"}, {"other", "2"})).written.empty())
      << "a compareSet that did not write wakes nobody";
  EXPECT_TRUE(table.execute(make(sp::Op::kDelete, {"a"})).written.empty());
}

TEST(KeyValueTable, DeleteCheckAndCount) {
  KeyValueTable table;
  answered(table, make(sp::Op::kMultiSet, {"a", "b"}, {"1", "2"}));
  EXPECT_EQ(answered(table, make(sp::Op::kNumKeys, {})).number, 2);
  EXPECT_EQ(answered(table, make(sp::Op::kCheck, {"a", "b"})).number, 1);
  EXPECT_EQ(answered(table, make(sp::Op::kDelete, {"a"})).number, 1);
  EXPECT_EQ(answered(table, make(sp::Op::kDelete, {"a"})).number, 0);
  EXPECT_EQ(answered(table, make(sp::Op::kCheck, {"a", "b"})).number, 0);
  EXPECT_EQ(answered(table, make(sp::Op::kNumKeys, {})).number, 1);
  answered(table, make(sp::Op::kAppend, {"b"}, {"3"}));  // append extends
  EXPECT_EQ(answered(table, make(sp::Op::kGet, {"b"})).values.at(0), "23");
}

}  // namespace

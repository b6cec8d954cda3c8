// acc's warnings: once per process per message, only on the local main process, redirectable and
// silenceable.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <acc/warnings.h>

namespace {

class Warnings : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = acc::set_warning_handler([this](const std::string& message) { seen_.push_back(message); });
  }
  void TearDown() override {
    acc::set_warning_handler(previous_);
    acc::detail::set_warning_local_rank(-1);
  }
  std::vector<std::string> seen_;
  acc::WarningHandler previous_;
};

TEST_F(Warnings, EachMessageOncePerProcess) {
  acc::detail::warn("acc: warning: once-test A");
  acc::detail::warn("acc: warning: once-test A");
  acc::detail::warn("acc: warning: once-test B");
  EXPECT_EQ(seen_, (std::vector<std::string>{"acc: warning: once-test A", "acc: warning: once-test B"}));
}

TEST_F(Warnings, OnlyTheLocalMainProcessReports) {
  acc::detail::set_warning_local_rank(1);
  acc::detail::warn("acc: warning: rank-test");
  EXPECT_TRUE(seen_.empty());
  acc::detail::set_warning_local_rank(0);
  acc::detail::warn("acc: warning: rank-test");
  EXPECT_EQ(seen_.size(), 1u);
}

TEST_F(Warnings, AnEmptyHandlerSilencesThem) {
  acc::set_warning_handler(nullptr);
  acc::detail::warn("acc: warning: silenced-test");
  EXPECT_TRUE(seen_.empty());
}

TEST_F(Warnings, TheDefaultHandlerWritesToStderr) {
  acc::set_warning_handler(previous_);
  ::testing::internal::CaptureStderr();
  acc::detail::warn("acc: warning: stderr-test");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "acc: warning: stderr-test\n");
}

}  // namespace

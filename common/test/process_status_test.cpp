#include <gtest/gtest.h>

#include <signal.h>

#include <acc_common/process_status.h>

namespace {

using namespace acc::common;

// waitpid's encoding: exit code in the second byte, the signal in the low bits.
constexpr int exited(int code) { return code << 8; }

TEST(ProcessStatus, DescribesExitsAndSignals) {
  EXPECT_EQ(describe_wait_status(exited(3)), "exited with code 3");
  EXPECT_EQ(describe_wait_status(SIGKILL), "was killed by signal 9 (SIGKILL)");
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_TRUE(wait_status_failed(exited(1)));
  EXPECT_TRUE(wait_status_failed(SIGSEGV));
  EXPECT_FALSE(wait_status_failed(exited(0)));
}

}  // namespace

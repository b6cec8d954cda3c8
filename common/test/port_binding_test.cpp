#include <gtest/gtest.h>

#include <unistd.h>

#include <acc_common/port_binding.h>

#include <cerrno>

namespace {

using namespace acc::common;

TEST(PortBinding, FreePortIsReservedUntilClosed) {
  int error = 0;
  const int fd = bind_host("127.0.0.1", 0, true, error);
  ASSERT_GE(fd, 0) << error;
  const int port = bound_port(fd);
  EXPECT_GT(port, 0);
  EXPECT_EQ(bind_host("127.0.0.1", port, true, error), -1);
  EXPECT_EQ(error, EADDRINUSE);
  ::close(fd);
  const int again = bind_host("127.0.0.1", port, false, error);  // bound only, to settle the port
  EXPECT_GE(again, 0) << error;
  ::close(again);
}

TEST(PortBinding, AddressOfAnotherMachineIsNotAvailable) {
  int error = 0;
  EXPECT_EQ(bind_host("192.0.2.1", 0, true, error), -1);  // TEST-NET-1: never this machine's
  EXPECT_EQ(error, EADDRNOTAVAIL);
  const int any = bind_every_interface(0, true, error);
  ASSERT_GE(any, 0) << error;
  EXPECT_GT(bound_port(any), 0);
  ::close(any);
}

TEST(PortBinding, UnresolvedNamesThrow) {
  int error = 0;
  EXPECT_THROW(bind_host("no-such-host.invalid", 0, true, error), UnresolvedHost);
}

}  // namespace

// Whose a loopback connection is (runtime/src/comm/peer_process.h): this process's own, over IPv4,
// IPv4-mapped IPv6 and IPv6 sockets, against a child process's.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <optional>
#include <string>

#include "comm/peer_process.h"
#include "comm/socket_util.h"
#include "loopback_peers.h"

namespace {

using acc::detail::Fd;
using acc::detail::refuse_unless_own_process;

Fd accept_one(int listener) {
  acc::testing::set_io_timeout(listener, acc::testing::kIoTimeout);  // accept() obeys SO_RCVTIMEO
  return Fd(accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
}

TEST(PeerProcess, OwnIpv4ConnectionIsAdmitted) {
  Fd listener = acc::testing::listen_on();
  Fd client = acc::testing::connect_loopback(acc::detail::local_port(listener.get()));
  Fd accepted = accept_one(listener.get());
  ASSERT_TRUE(accepted.valid());
  EXPECT_EQ(refuse_unless_own_process(accepted.get()), std::nullopt);
}

TEST(PeerProcess, OwnIpv4MappedIpv6ConnectionIsAdmitted) {
  // A dual-stack client socket reaching 127.0.0.1 is listed in /proc/net/tcp6 as ::ffff:127.0.0.1.
  Fd listener = acc::testing::listen_on();
  Fd client(socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "::ffff:127.0.0.1", &address.sin6_addr);
  address.sin6_port = htons(static_cast<uint16_t>(acc::detail::local_port(listener.get())));
  ASSERT_EQ(connect(client.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0)
      << acc::detail::errno_text(errno);
  Fd accepted = accept_one(listener.get());
  ASSERT_TRUE(accepted.valid());
  EXPECT_EQ(refuse_unless_own_process(accepted.get()), std::nullopt);
}

TEST(PeerProcess, OwnIpv6ConnectionIsAdmitted) {
  Fd listener(socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_addr = in6addr_loopback;
  if (bind(listener.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    GTEST_SKIP() << "no IPv6 loopback here: " << acc::detail::errno_text(errno);
  }
  ASSERT_EQ(listen(listener.get(), 4), 0);
  address.sin6_port = htons(static_cast<uint16_t>(acc::detail::local_port(listener.get())));
  Fd client(socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_EQ(connect(client.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  Fd accepted = accept_one(listener.get());
  ASSERT_TRUE(accepted.valid());
  EXPECT_EQ(refuse_unless_own_process(accepted.get()), std::nullopt);
}

TEST(PeerProcess, ChildProcessConnectionIsRefused) {
  Fd listener = acc::testing::listen_on();
  const int port = acc::detail::local_port(listener.get());
  int hold[2];
  ASSERT_EQ(pipe(hold), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // connects, then keeps its socket open until the parent closes the pipe
    close(hold[1]);
    const int fd = acc::testing::try_connect_loopback(port);
    if (fd < 0) _exit(3);
    char byte;
    (void)read(hold[0], &byte, 1);
    _exit(0);
  }
  close(hold[0]);
  Fd accepted = accept_one(listener.get());
  const auto refusal = accepted.valid() ? refuse_unless_own_process(accepted.get()) : std::nullopt;
  close(hold[1]);  // lets the child exit
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(accepted.valid());
  ASSERT_TRUE(refusal.has_value()) << "a child's connection passed for this process's";
  EXPECT_NE(refusal->find("it comes from another process (uid " + std::to_string(getuid()) + ", socket inode "),
            std::string::npos)
      << *refusal;
}

TEST(PeerProcess, ConnectionWhoseClientIsGoneIsRefused) {
  Fd listener = acc::testing::listen_on();
  Fd client = acc::testing::connect_loopback(acc::detail::local_port(listener.get()));
  Fd accepted = accept_one(listener.get());
  client.reset();  // the owner closed it: no process holds that socket any more
  const auto refusal = refuse_unless_own_process(accepted.get());
  EXPECT_TRUE(refusal.has_value());
}

}  // namespace

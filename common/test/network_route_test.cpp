#include <gtest/gtest.h>

#include <acc_common/network_route.h>

namespace {

using acc::common::Route;
using acc::common::route_to;

TEST(NetworkRoute, LoopbackHostIsReachedOverLoopback) {
  Route route;
  std::string error;
  ASSERT_TRUE(route_to("127.0.0.1", route, error)) << error;
  EXPECT_EQ(route.source_address, "127.0.0.1");
  EXPECT_EQ(route.interface, "lo");
  EXPECT_TRUE(route.loopback);
  EXPECT_TRUE(error.empty());
}

TEST(NetworkRoute, UnresolvableHostIsNamed) {
  Route route;
  std::string error;
  EXPECT_FALSE(route_to("no-such-host.invalid", route, error));
  EXPECT_NE(error.find("cannot resolve 'no-such-host.invalid'"), std::string::npos) << error;
}

TEST(NetworkRoute, GlooNetworkVariablesWinThenTheRoute) {
  using acc::common::choose_gloo_network;
  auto named = choose_gloo_network("10.9.9.9", "eth7", "eth8");
  EXPECT_EQ(named.interface, "eth7");
  EXPECT_EQ(named.description, "eth7 (no address here, GLOO_SOCKET_IFNAME)");
  EXPECT_EQ(choose_gloo_network("10.9.9.9", "lo", "").description, "lo (127.0.0.1, GLOO_SOCKET_IFNAME)");
  EXPECT_EQ(choose_gloo_network("10.9.9.9", "", "eth8").interface, "eth8");
  // NCCL's exclusion and list forms are not one interface: the route decides.
  for (const char* nccl : {"^docker", "=eth0", "eth0,eth1"}) {
    auto routed = choose_gloo_network("127.0.0.1", "", nccl);
    EXPECT_TRUE(routed.interface.empty()) << nccl;
    EXPECT_EQ(routed.address, "127.0.0.1") << nccl;
  }
  auto local = choose_gloo_network("127.0.0.1", "", "");
  EXPECT_EQ(local.description, "lo (127.0.0.1): MASTER_ADDR 127.0.0.1 is this machine's loopback");
  auto unknown = choose_gloo_network("no-such-host.invalid", "", "");
  EXPECT_TRUE(unknown.address.empty() && unknown.interface.empty());
  EXPECT_NE(unknown.description.find("cannot resolve"), std::string::npos) << unknown.description;
}

}  // namespace

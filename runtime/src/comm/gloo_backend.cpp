// The only translation unit that sees Gloo's headers (-DUSE_C10D_GLOO, Debian's libgloo-dev: the
// torch wheel ships Gloo inside libtorch_cpu but not its headers).
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <cstdlib>

#include "comm/process_group.h"
#include "comm/store_socket.h"

namespace acc::detail {

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size, Milliseconds timeout,
                                                    const std::string& master_addr) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  // Same interface choice as torch.distributed: GLOO_SOCKET_IFNAME, else loopback for a loopback
  // rendezvous (one machine), else the address this machine's hostname resolves to.
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
  } else if (is_loopback_host(master_addr)) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  } else {
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

}  // namespace acc::detail

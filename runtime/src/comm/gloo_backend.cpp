// The only translation unit that sees Gloo's headers (-DUSE_C10D_GLOO, Debian's libgloo-dev: the
// torch wheel ships Gloo inside libtorch_cpu but not its headers).
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <stdexcept>

#include "comm/process_group.h"

namespace acc::detail {

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size, Milliseconds timeout,
                                                    const GlooDevice& network) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  if (!network.interface.empty()) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(network.interface));
  } else if (!network.address.empty()) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(network.address));
  } else {
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  try {
    // Gloo connects every pair of ranks here, each to the address the other published.
    return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string(e.what()) + "\n(Gloo connects every pair of ranks directly; rank " +
                             std::to_string(rank) + " offered " + network.description +
                             ". If the other machines cannot reach that address, export GLOO_SOCKET_IFNAME=<the "
                             "interface that reaches them> on every machine)");
  }
}

}  // namespace acc::detail

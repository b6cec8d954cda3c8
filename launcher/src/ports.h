#pragma once
// The rendezvous port: a free one for --main_process_port 0, and a check that the main machine's port is
// not taken before any rank starts (otherwise rank 0 fails deep inside the runtime's TCPStore).
#include "launch_plan.h"

namespace acc::launcher {

// A port the kernel reports free right now.
int pick_free_port();

// True when a listening socket on `port` could not be bound on this machine.
bool port_in_use(int port);

// Settles plan.master_port on the machine that serves the rendezvous (machine rank 0): 0 becomes a free
// port; a busy port chosen by the user is a UsageError naming the port and the flag; a busy default port
// on a single machine moves to a free one, with a note (as Accelerate does). Other machines only connect,
// so nothing is checked there.
void assign_port(LaunchPlan& plan);

}  // namespace acc::launcher

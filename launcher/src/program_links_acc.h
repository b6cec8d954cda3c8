#pragma once
// Whether the program to launch is an acc program: an ELF executable that needs libacc. Only such a
// rank 0 can serve the store on the socket the launcher reserved (ACC_STORE_LISTEN_FD); any other
// program (Python through torch.distributed, a script) binds MASTER_PORT itself, so for it the launcher
// must leave the port free.
#include <string>

namespace acc::launcher {

// `program` as given on the command line: a name without '/' is looked up in PATH, as exec does.
// False when it cannot be found or read, is not ELF, or does not list libacc among its needed libraries.
bool program_links_acc(const std::string& program);

}  // namespace acc::launcher

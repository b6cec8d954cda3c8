#pragma once
// SLURM's compressed node lists ("gpu[003-005,9],cpu1"), as SLURM_STEP_NODELIST and SLURM_JOB_NODELIST
// give them. acc-launch under srun and the runtime under srun both rendezvous on the first node.
#include <string>

namespace acc::common {

// The first host of a node list: "gpu[03-05,9],cpu1" -> "gpu03", "rack[2]-n[1-4]" -> "rack2-n1". The
// first number keeps its zero padding, as SLURM's host names do. A stray ']' never makes a later comma
// look bracketed: the first entry still ends at the first comma outside brackets.
std::string first_slurm_host(const std::string& nodelist);

}  // namespace acc::common

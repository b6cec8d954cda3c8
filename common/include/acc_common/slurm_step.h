#pragma once
// Who a SLURM job step is, for ranks that srun starts without acc-launch and for the acc-launch that srun
// starts once per node: the step's id, and its rendezvous port when the batch script sets no MASTER_PORT.
#include <string>

namespace acc::common {

// "SLURM_JOB_ID.SLURM_STEP_ID" ("4711.0"): the same on every rank of the step and on no other step, so the
// ranks compare it at rendezvous as they compare acc-launch's job id. Empty when job_id is empty; a missing
// step id (the batch step) counts as "batch".
std::string slurm_step_job_id(const std::string& job_id, const std::string& step_id);

// The rendezvous port of a step whose environment has no MASTER_PORT: 10000 + 20 x (job id mod 1000) +
// 2 x (step id mod 10), an even port in 10000-29998, below Linux's ephemeral ports (32768 and up); the odd
// port after it is the heartbeat of one acc-launch per node (main_process_port + 1). Every rank computes
// the same port without talking to the others; steps that run at once on the same nodes get different
// ports unless their job ids differ by a multiple of 1000 (then the job id check names the clash). 0 when
// job_id is not a number (the caller keeps its default).
int slurm_step_port(const std::string& job_id, const std::string& step_id);

}  // namespace acc::common

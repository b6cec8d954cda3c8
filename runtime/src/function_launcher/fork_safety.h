#pragma once
// What the caller of acc::launch must not have done before forking ranks, checked without
// touching what is checked (torch-free: looking at CUDA through torch would initialize it).
namespace acc::detail {

/// True once the CUDA driver is initialized in this process (cuInit ran: the CUDA runtime does it on
/// its first call, torch::cuda::is_available() and device_count() included). A forked child cannot
/// use CUDA after that, which is why PyTorch counts devices through NVML when asked to keep fork
/// usable. Asked of the driver library only if it is already loaded, with a call that answers
/// "not initialized" before cuInit, so the check itself initializes nothing.
bool cuda_initialized();

/// The threads this process runs now (/proc/self/task); 0 when that cannot be read.
int thread_count();

/// The CPUs this process may run on (its affinity mask), at least 1.
int usable_cpus();

/// Marks this process as a rank of acc::launch (in the child, right after the fork).
void mark_launched_rank();
/// Whether this process is a rank of acc::launch.
bool is_launched_rank();

}  // namespace acc::detail

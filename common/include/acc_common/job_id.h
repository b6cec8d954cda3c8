#pragma once
// Job ids: ranks compare them at rendezvous, so that no rank joins another job's store.
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

namespace acc::common {

// A fresh random id, 16 lower-case hex digits from the kernel's random source (getrandom). Throws
// std::system_error ("getrandom: ...") when the kernel gives none; each wing turns that into its own error.
std::string new_job_id();

// The same from any source with getrandom's contract (bytes written, or -1 with errno set): short reads
// and EINTR are retried. The seam through which tests give both.
using RandomSource = std::function<ssize_t(uint8_t* buffer, size_t length)>;
std::string new_job_id(const RandomSource& draw);

}  // namespace acc::common

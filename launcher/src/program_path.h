#pragma once
// The program a launch starts, found as execvp finds it and checked before anything starts: a
// directory, a FIFO or a device given as the program is refused with one line (exit 2), instead of
// being read (acc-launch reads the program to see whether it links libacc: a FIFO would block it, a
// device such as /dev/zero would never end, a directory made the read throw).
#include <string>

namespace acc::launcher {

// The file execvp would run for `program`: itself when it holds a '/', else the first regular,
// executable file of that name in a directory of PATH (execvp passes over anything else). Empty when
// there is none.
std::string find_program(const std::string& program);

// Throws UsageError "'<program>' is <what it is>, not a program; <fix>" when `program` (as given, or
// as found in PATH) exists but is not a regular file. A missing or non-executable file is left to exec,
// whose reason acc-launch reports with exit 127 or 126.
void check_program_file(const std::string& program, const std::string& fix);

}  // namespace acc::launcher

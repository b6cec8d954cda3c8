// One rank of a collective that does not complete at once (started by stall_test.cpp with torchrun's
// variables):
//   late MS         the last rank reaches accelerator.reduce MS milliseconds after the others; every
//                   rank checks the sum (the wait went on after the report).
//   skip            the last rank skips the reduce and goes on to gather: every rank must raise an
//                   acc::DistributedError (caught: "RAISED: <message>", exit 0).
//   skip_to_larger  the same, the last rank going on to the next reduce, of a larger tensor.
//   uncaught TYPE   throws an uncaught acc::ConfigError ("config") or std::logic_error ("other").
//   stopped R       after a first reduce, rank R stops itself (SIGSTOP; a child of it sends SIGCONT
//                   12 s later) while the others call the next reduce; each rank prints
//                   "RAISED after <ms> ms: <message>" (timeout 4 s).
//   stopped_uncaught R  the same, the error left uncaught: each rank but R ends with libacc's
//                   "acc: uncaught ..." line and exit status 1, as a training program does (under acc-launch).
//   busy R          after a first reduce, rank R sleeps 30 s (busy outside the collective) while the others
//                   call the next reduce, the error left uncaught (exit status 1).
// Options: a stall report interval of 1500 ms and a timeout of 20 s (4 s for "stopped", "stopped_uncaught"
// and "busy").
#include <ATen/ops/full.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>

#include <acc/accelerator.h>
#include <acc/errors.h>

#include "worker_checks.h"

using acc::testing::expect;
using acc::testing::fail;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "uncaught") {
    std::cout << "before the error" << std::endl;
    if (argc > 2 && std::string(argv[2]) == "config")
      throw acc::ConfigError("acc: gradient_accumulation_steps must be at least 1 (it is 0); pass 1 or more");
    throw std::logic_error("not an acc error");
  }
  acc::Accelerator accelerator(acc::AcceleratorOptions()
                                   .timeout(std::chrono::seconds(mode.rfind("stopped", 0) == 0 || mode == "busy" ? 4 : 20))
                                   .stall_report_interval(std::chrono::milliseconds(1500)));
  const int rank = accelerator.process_index(), world = accelerator.num_processes();
  const bool last = rank == world - 1;
  const auto one = at::full({1}, 1.0f);
  if (mode == "late") {
    if (last) std::this_thread::sleep_for(std::chrono::milliseconds(std::stoi(argv[2])));
    const auto sum = accelerator.reduce(one, acc::ReduceOp::SUM);
    expect(sum.item<float>() == static_cast<float>(world), "the reduce after the stall gave a wrong sum");
    std::cout << "OK" << std::endl;
    return 0;
  }
  if (mode == "skip" || mode == "skip_to_larger") {
    try {
      if (!last) accelerator.reduce(one, acc::ReduceOp::SUM);
      if (mode == "skip") {
        accelerator.gather(one);
      } else {
        // The next reduce, of another size: Gloo pairs it with the others' reduce of `one` and fails
        // with its own EnforceNotMet on the size.
        accelerator.reduce(at::full({3}, 1.0f), acc::ReduceOp::SUM);
      }
      accelerator.reduce(one, acc::ReduceOp::SUM);
    } catch (const acc::DistributedError& e) {
      std::cout << "RAISED: " << e.what() << std::endl;
      return 0;
    }
    fail("the ranks called different collectives and nothing was raised");
  }
  if (mode == "busy") {
    accelerator.reduce(one, acc::ReduceOp::SUM);
    if (rank == std::stoi(argv[2])) std::this_thread::sleep_for(std::chrono::seconds(30));
    accelerator.reduce(one, acc::ReduceOp::SUM);
    std::cout << "NOT RAISED" << std::endl;
    return 0;
  }
  if (mode == "stopped" || mode == "stopped_uncaught") {
    accelerator.reduce(one, acc::ReduceOp::SUM);
    if (rank == std::stoi(argv[2])) {
      const pid_t self = ::getpid();
      if (::fork() == 0) {  // only async-signal-safe calls: the parent has threads
        for (int fd = 0; fd < 1024; ++fd) ::close(fd);  // the test reads the rank's output to its end
        ::sleep(12);
        ::kill(self, SIGCONT);
        ::_exit(0);
      }
      ::raise(SIGSTOP);
    }
    if (mode == "stopped_uncaught") {
      accelerator.reduce(one, acc::ReduceOp::SUM);
      std::cout << "NOT RAISED" << std::endl;
      return 0;
    }
    const auto start = std::chrono::steady_clock::now();
    try {
      accelerator.reduce(one, acc::ReduceOp::SUM);
    } catch (const acc::DistributedError& e) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
      std::cout << "RAISED after " << ms.count() << " ms: " << e.what() << std::endl;
      return 0;
    }
    std::cout << "NOT RAISED" << std::endl;
    return 0;
  }
  fail("unknown mode '" + mode + "'");
}

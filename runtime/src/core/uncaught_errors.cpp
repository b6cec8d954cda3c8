// An acc error that nobody catches ends the program as an uncaught Python exception ends Python: its
// type and message on stderr and exit status 1. C++'s default is "terminate called after throwing an
// instance of 'acc::ConfigError'" and SIGABRT, which acc-launch, torchrun and SLURM report as a crash
// (a signal, a core dump) rather than as the mistake the message names. Other exceptions keep the
// default handler, core dump included: those are the crashes.
//
// Installed when libacc is loaded, chaining to whatever handler was set before; a program that sets
// its own handler later replaces this one.
#include <acc/errors.h>

#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <typeinfo>

namespace acc::detail {
namespace {

std::terminate_handler previous_handler = nullptr;

std::string type_name(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), std::free);
  return status == 0 && name ? name.get() : type.name();
}

[[noreturn]] void on_terminate() {
  if (const std::exception_ptr error = std::current_exception()) {
    try {
      std::rethrow_exception(error);
    } catch (const acc::Error& e) {
      std::fflush(stdout);  // what the program printed before comes before the error, as in Python
      std::fprintf(stderr, "acc: uncaught %s: %s\n", type_name(typeid(e)).c_str(), e.what());
      std::fflush(stderr);
      // _Exit, not exit: other threads (a collective's, a data loader's) may still run, and static
      // destructors under them can hang.
      std::_Exit(1);
    } catch (...) {
    }
  }
  if (previous_handler != nullptr) previous_handler();
  std::abort();
}

struct InstallAtLoad {
  InstallAtLoad() { previous_handler = std::set_terminate(on_terminate); }
} install_at_load;

}  // namespace
}  // namespace acc::detail

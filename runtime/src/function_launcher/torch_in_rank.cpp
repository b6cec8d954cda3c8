#include "function_launcher/torch_in_rank.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

namespace acc::detail {

void set_intra_op_threads(int threads) { at::set_num_threads(threads); }

std::string exception_text(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

}  // namespace acc::detail

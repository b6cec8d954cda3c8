// Must not compile: MyBatch has no to_device overload (checked by CTest for acc's message).
#include <acc/to_device.h>

namespace mine {
struct MyBatch {
  at::Tensor x;
};
}  // namespace mine

int main() {
  std::vector<mine::MyBatch> batches(1);
  auto moved = acc::detail::place(batches, c10::Device("cpu"), false);
  (void)moved;
}

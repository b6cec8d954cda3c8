// optimizer-declaration: optimizers are created as `acc::Optimizer<T>` (a subclass of T with T's
// constructors) so that step()/zero_grad() can skip while accumulating, skip on fp16 overflow and
// all-gather sharded parameters. Arguments stay as they are.
#include "engine/Migration.h"
#include "rules/WrapCreations.h"

namespace accmigrate {
void registerOptimizerDeclaration(Migration &m) { wrapCreations(m, "torch::optim::Optimizer", "acc::Optimizer"); }
}  // namespace accmigrate

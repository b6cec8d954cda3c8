// scheduler-declaration: LR schedulers are created as `acc::Scheduler<T>`, which steps only when the
// optimizer really stepped (not while accumulating gradients, not after a skipped fp16 step).
#include "Migration.h"
#include "WrapCreations.h"

namespace accmigrate {
void applySchedulerDeclaration(Migration &m) { wrapCreations(m, "torch::optim::LRScheduler", "acc::Scheduler"); }
}  // namespace accmigrate

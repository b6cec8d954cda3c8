#include "optim/optimizer_state_fields.h"

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/lbfgs.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include "optim/device_step.h"

namespace acc::detail {

StateFields fields_of(torch::optim::OptimizerParamState& state) {
  using namespace torch::optim;
  write_back_step_count(state);  // the step a fused kernel may have skipped on the device
  if (auto* s = dynamic_cast<SGDParamState*>(&state)) return {{{"momentum_buffer", &s->momentum_buffer()}}, {}};
  if (auto* s = dynamic_cast<AdamParamState*>(&state)) {
    return {{{"exp_avg", &s->exp_avg()}, {"exp_avg_sq", &s->exp_avg_sq()}, {"max_exp_avg_sq", &s->max_exp_avg_sq()}},
            {},
            &s->step()};
  }
  if (auto* s = dynamic_cast<AdamWParamState*>(&state)) {
    return {{{"exp_avg", &s->exp_avg()}, {"exp_avg_sq", &s->exp_avg_sq()}, {"max_exp_avg_sq", &s->max_exp_avg_sq()}},
            {},
            &s->step()};
  }
  if (auto* s = dynamic_cast<AdagradParamState*>(&state)) return {{{"sum", &s->sum()}}, {}, &s->step()};
  if (auto* s = dynamic_cast<RMSpropParamState*>(&state)) {
    return {{{"square_avg", &s->square_avg()}, {"momentum_buffer", &s->momentum_buffer()}, {"grad_avg", &s->grad_avg()}},
            {},
            &s->step()};
  }
  if (auto* s = dynamic_cast<LBFGSParamState*>(&state)) {
    // ro and al are scalars: they stay in the archive.
    return {{{"d", &s->d()}, {"H_diag", &s->H_diag()}, {"prev_flat_grad", &s->prev_flat_grad()}},
            {{"old_dirs", &s->old_dirs()}, {"old_stps", &s->old_stps()}}};
  }
  return {};
}

std::unique_ptr<torch::optim::OptimizerParamState> new_param_state(const torch::optim::Optimizer& optimizer) {
  using namespace torch::optim;
  if (dynamic_cast<const SGD*>(&optimizer)) return std::make_unique<SGDParamState>();
  if (dynamic_cast<const Adam*>(&optimizer)) return std::make_unique<AdamParamState>();
  if (dynamic_cast<const AdamW*>(&optimizer)) return std::make_unique<AdamWParamState>();
  if (dynamic_cast<const Adagrad*>(&optimizer)) return std::make_unique<AdagradParamState>();
  if (dynamic_cast<const RMSprop*>(&optimizer)) return std::make_unique<RMSpropParamState>();
  return nullptr;
}

}  // namespace acc::detail

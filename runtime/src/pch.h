// Precompiled for libacc and its tests: the libtorch headers nearly every file includes.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#pragma once
// Umbrella header of libacc: distributed training for libtorch.
#include <acc/accelerator.h>
#include <acc/collectives.h>
#include <acc/data_loader.h>
#include <acc/data_sharding.h>
#include <acc/errors.h>
#include <acc/launch.h>
#include <acc/optimizer.h>
#include <acc/options.h>
#include <acc/process_control.h>
#include <acc/scheduler.h>
#include <acc/state.h>
#include <acc/tensor_tree.h>
#include <acc/to_device.h>
#include <acc/version.h>

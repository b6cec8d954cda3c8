#pragma once
// FSDP's state-dict layout (checkpoint/state_dict_layout.h; docs/fsdp.md, "Checkpoints").
// FULL_STATE_DICT writes exactly the files DDP writes (whole tensors), gathering each unit's
// optimizer state from the shards one field at a time. SHARDED_STATE_DICT has every rank write
// its own slices (checkpoint/shard_files.h) and lets every rank read back the element ranges it
// now owns, so a checkpoint loads on another number of processes.
#include <memory>

#include <acc/fsdp.h>

#include "checkpoint/state_dict_layout.h"

namespace acc::detail {

class ShardedEngine;

/// `engine` null: nothing is sharded (one process, NO_SHARD), and SHARDED_STATE_DICT writes one
/// shard from the main process. ConfigError for LOCAL_STATE_DICT.
std::unique_ptr<StateDictLayout> make_sharded_state_dict_layout(StateDictType type, ShardedEngine* engine);

}  // namespace acc::detail

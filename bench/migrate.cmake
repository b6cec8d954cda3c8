# acc-migrate throughput: seconds per file on a corpus of files that include <torch/torch.h>, without
# the precompiled-header cache, with a cold cache, with a warm one, and clang-tidy running one
# trivial check on the same files with the same flags, all in one run; ratios against the uncached
# run. `ninja bench_migrate` (ACC_MIGRATE_BENCH_FILES / ACC_MIGRATE_BENCH_JOBS change the corpus size
# and -j).
if(TARGET acc-migrate)
  set(ACC_MIGRATE_BENCH_FILES 20 CACHE STRING "files in the acc-migrate benchmark corpus")
  set(ACC_MIGRATE_BENCH_JOBS 1 CACHE STRING "acc-migrate -j in its benchmark")
  add_custom_target(bench_migrate
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/migrate_throughput.sh $<TARGET_FILE:acc-migrate>
            ${PROJECT_SOURCE_DIR}/examples/programs ${ACC_MIGRATE_BENCH_FILES} ${ACC_MIGRATE_BENCH_JOBS}
    DEPENDS acc-migrate USES_TERMINAL)
endif()

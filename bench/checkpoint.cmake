# save_state / load_state throughput against raw sequential file I/O of the same bytes on the same
# disk, and memory-mapped against copying safetensors reads. Run: build/bin/acc_bench_checkpoint
add_executable(acc_bench_checkpoint ${CMAKE_CURRENT_LIST_DIR}/checkpoint.cpp)
target_link_libraries(acc_bench_checkpoint PRIVATE acc)
set_target_properties(acc_bench_checkpoint PROPERTIES BUILD_RPATH "${ACC_TORCH_LIBDIR}")

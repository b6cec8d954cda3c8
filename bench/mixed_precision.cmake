add_executable(acc_bench_mixed_precision ${CMAKE_CURRENT_LIST_DIR}/mixed_precision.cpp)
target_link_libraries(acc_bench_mixed_precision PRIVATE acc)
set_target_properties(acc_bench_mixed_precision PROPERTIES BUILD_RPATH "${ACC_TORCH_LIBDIR}")

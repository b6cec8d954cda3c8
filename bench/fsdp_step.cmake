add_executable(acc_bench_fsdp_step ${CMAKE_CURRENT_LIST_DIR}/fsdp_step.cpp)
target_link_libraries(acc_bench_fsdp_step PRIVATE acc acc_test_support)
target_include_directories(acc_bench_fsdp_step PRIVATE ${PROJECT_SOURCE_DIR}/test/support)
set_target_properties(acc_bench_fsdp_step PROPERTIES BUILD_RPATH "${ACC_TORCH_LIBDIR}")

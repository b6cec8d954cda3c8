add_executable(acc_bench_fsdp_collectives ${CMAKE_CURRENT_LIST_DIR}/fsdp_collectives.cpp)
target_link_libraries(acc_bench_fsdp_collectives PRIVATE acc acc_test_support)
target_include_directories(acc_bench_fsdp_collectives PRIVATE ${PROJECT_SOURCE_DIR}/runtime/src
                                                              ${PROJECT_SOURCE_DIR}/test/support)
set_target_properties(acc_bench_fsdp_collectives PROPERTIES BUILD_RPATH "${ACC_TORCH_LIBDIR}")

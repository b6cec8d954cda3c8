# Prepared data loader against libtorch's plain loader on the same dataset and options.
add_executable(acc_bench_data_loader ${CMAKE_CURRENT_LIST_DIR}/data_loader.cpp)
target_link_libraries(acc_bench_data_loader PRIVATE acc)
set_target_properties(acc_bench_data_loader PROPERTIES BUILD_RPATH "${ACC_TORCH_LIBDIR}")

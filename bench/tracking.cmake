# Cost of Accelerator::log (through the tracker set it delegates to) and of ProgressBar::update
# at every step, against the same loop without them.
add_executable(acc_bench_tracking ${CMAKE_CURRENT_LIST_DIR}/tracking.cpp)
target_link_libraries(acc_bench_tracking PRIVATE acc)
target_include_directories(acc_bench_tracking PRIVATE ${PROJECT_SOURCE_DIR}/runtime/src)
set_target_properties(acc_bench_tracking PROPERTIES BUILD_RPATH "${ACC_TORCH_LIBDIR}")

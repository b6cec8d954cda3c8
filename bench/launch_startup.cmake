# `ninja bench_launch_startup`: acc-launch start-up against torchrun (a script; nothing to compile).
if(TARGET acc-launch)
  add_custom_target(bench_launch_startup
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/launch_startup.sh $<TARGET_FILE:acc-launch>
    DEPENDS acc-launch USES_TERMINAL)
endif()

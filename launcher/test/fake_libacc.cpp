// The stand-in libacc.so of launcher_fake_acc_program (see CMakeLists.txt): one symbol to link against.
int acc_fake_library_symbol() { return 1; }

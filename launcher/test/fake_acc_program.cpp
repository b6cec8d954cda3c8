// A program that needs libacc.so, as acc programs do (see CMakeLists.txt). It is never run.
int acc_fake_library_symbol();
int main() { return acc_fake_library_symbol() - 1; }

// The fragments are compiled and linked, never run: each needs a program around it to mean anything.
int main() { return 0; }

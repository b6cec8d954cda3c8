#include "loop.h"

void evaluate() {}

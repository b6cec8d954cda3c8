#include "uncalled.h"

void report_only() {}

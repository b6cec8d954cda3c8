// A project header that, like one progress-bar library, defines a keyword away for old compilers:
// acc's headers must not come after it.
#pragma once
#define constexpr

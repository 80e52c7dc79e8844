/* fuzz-serve: pistisd/fsops.c behind the seam (tests/fuzz/serve-seam.h). */
#include "tests/fuzz/serve-seam.h"
#include "pistisd/fsops.c"

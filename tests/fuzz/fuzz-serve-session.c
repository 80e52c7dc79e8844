/* fuzz-serve: pistisd/session.c behind the seam (tests/fuzz/serve-seam.h). */
#include "tests/fuzz/serve-seam.h"
#include "pistisd/session.c"

/* fuzz-serve: pistisd/ops-admin.c behind the seam (tests/fuzz/serve-seam.h). */
#include "tests/fuzz/serve-seam.h"
#include "pistisd/ops-admin.c"

#include "../../../src/time_dilation.h"

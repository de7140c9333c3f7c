/* See sched.h. */
#include <xen/sched.h>

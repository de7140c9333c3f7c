/* Notes and the timer's interrupt stub of lapicguest (see lapicguest.c). */
#include "../xen-note.h"

NOTE(6, .asciz, "selena-lapicguest")  /* XEN_ELFNOTE_GUEST_OS */

#include "../head32.S"

INTERRUPT_STUB(timer_entry, timer_interrupt)

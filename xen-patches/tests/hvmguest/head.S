/* Notes and interrupt stubs of hvmguest (see hvmguest.c). */
#include "../xen-note.h"

NOTE(6, .asciz, "selena-hvmguest")    /* XEN_ELFNOTE_GUEST_OS */

#include "../head32.S"

INTERRUPT_STUB(irq0_entry, irq0_interrupt)
INTERRUPT_STUB(irq8_entry, irq8_interrupt)
INTERRUPT_STUB(lapic_entry, lapic_interrupt)
INTERRUPT_STUB(other_entry, other_interrupt)

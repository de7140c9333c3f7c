/* Entry and Xen ELF notes of tickguest (see tickguest.c). */
#include "../xen-note.h"

NOTE(6, .asciz, "selena-tickguest")   /* XEN_ELFNOTE_GUEST_OS */
NOTE(5, .asciz, "xen-3.0")            /* XEN_ELFNOTE_XEN_VERSION */
NOTE(8, .asciz, "generic")            /* XEN_ELFNOTE_LOADER */
NOTE(3, .quad, 0)                     /* XEN_ELFNOTE_VIRT_BASE */
NOTE(4, .quad, 0)                     /* XEN_ELFNOTE_PADDR_OFFSET */
NOTE(1, .quad, _start)                /* XEN_ELFNOTE_ENTRY */
NOTE(2, .quad, hypercall_page)        /* XEN_ELFNOTE_HYPERCALL_PAGE */

    .section .note.GNU-stack, "", @progbits

    .text
    .globl _start
_start:
    lea stack_top(%rip), %rsp
    mov %rsi, %rdi                    /* start_info */
    call start
1:  jmp 1b

#include "../guest-pages.S"

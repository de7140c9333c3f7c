/*
 * What every guest of ours has after its entry code: the hypercall page
 * Xen fills in and a 16 KiB stack.  Included by the guests' head.S.
 */
    .balign 4096
    .globl hypercall_page
hypercall_page:
    .fill 4096, 1, 0

    .bss
    .balign 16
stack:
    .fill 16384, 1, 0
stack_top:

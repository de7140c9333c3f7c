/*
 * Entry, GDT, hypercall page and stack of our minimal 32-bit HVM-container
 * guests, #included by each guest's head.S after its own notes: entered at
 * _start (XEN_ELFNOTE_PHYS32_ENTRY) in 32-bit protected mode, paging off,
 * %ebx = hvm_start_info; calls the guest's start(start_info).
 */
NOTE(5, .asciz, "xen-3.0")            /* XEN_ELFNOTE_XEN_VERSION */
NOTE(18, .long, _start)               /* XEN_ELFNOTE_PHYS32_ENTRY */

    .section .note.GNU-stack, "", @progbits

    .code32
    .text
    .globl _start
_start:
    cli
    lgdt gdt_desc
    ljmp $0x08, $1f
1:  mov $0x10, %eax
    mov %eax, %ds
    mov %eax, %es
    mov %eax, %ss
    mov $stack_top, %esp
    push %ebx
    call start
2:  hlt
    jmp 2b

/* An interrupt stub: calls the C function `handler` with interrupts off. */
#define INTERRUPT_STUB(name, handler) \
    .globl name;                      \
name:                                 \
    pusha;                            \
    cld;                              \
    call handler;                     \
    popa;                             \
    iret

    .data
    .balign 8
gdt:
    .quad 0
    .quad 0x00cf9a000000ffff          /* 0x08: flat 32-bit code */
    .quad 0x00cf92000000ffff          /* 0x10: flat data */
gdt_end:
gdt_desc:
    .word gdt_end - gdt - 1
    .long gdt

#include "guest-pages.S"

    .text

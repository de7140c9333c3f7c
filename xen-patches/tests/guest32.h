/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Helpers shared by our minimal 32-bit HVM-container guests (lapicguest,
 * hvmguest), each a single C file entered from head32.S: hypercalls through
 * the hypercall page, CPUID, RDTSC, the local APIC, port I/O, IDT gates and
 * output on the PV console ring (whose page HVM_PARAM_CONSOLE_PFN names).
 */
#ifndef SELENA_GUEST32_H
#define SELENA_GUEST32_H

#include <stdint.h>

#define APIC_BASE      0xfee00000u
#define APIC_EOI       0x0b0
#define APIC_SVR       0x0f0
#define APIC_LVTT      0x320
#define APIC_LVT0      0x350
#define APIC_TMICT     0x380
#define APIC_TDCR      0x3e0
#define APIC_SVR_ON    (1u << 8)
#define LVTT_PERIODIC  (1u << 17)
#define LVTT_DEADLINE  (2u << 17)
#define MSR_TSC_DEADLINE 0x6e0
#define CPUID1_ECX_TSC_DEADLINE (1u << 24)
#define TDCR_DIV_1     0xb
/* Xen's virtual LAPIC bus runs at 100 MHz (APIC_BUS_CYCLE_NS). */
#define APIC_BUS_HZ    100000000u

#define __HYPERVISOR_sched_op          29
#define __HYPERVISOR_event_channel_op  32
#define __HYPERVISOR_hvm_op            34
#define HVMOP_get_param                1
#define HVM_PARAM_CONSOLE_PFN          17
#define HVM_PARAM_CONSOLE_EVTCHN       18
#define DOMID_SELF                     0x7ff0
#define SCHEDOP_yield                  0
#define SCHEDOP_shutdown               2
#define SHUTDOWN_poweroff              0
#define EVTCHNOP_send                  4

struct xencons {
    char in[1024];
    char out[2048];
    uint32_t in_cons, in_prod, out_cons, out_prod;
};

struct xen_hvm_param {
    uint16_t domid;
    uint16_t pad;
    uint32_t index;
    uint64_t value;
};

extern char hypercall_page[4096];       /* head32.S */

static volatile struct xencons *cons;
static uint32_t cons_port;
static uint64_t idt[256] __attribute__((aligned(8)));

static inline long hypercall2(unsigned int nr, long a1, long a2)
{
    long ret;
    void *entry = hypercall_page + nr * 32;

    asm volatile ( "call *%[entry]"
                   : "=a" (ret), "+b" (a1), "+c" (a2), [entry] "+d" (entry)
                   :
                   : "memory", "esi", "edi" );
    return ret;
}

static inline long hypercall3(unsigned int nr, long a1, long a2, long a3)
{
    long ret;
    void *entry = hypercall_page + nr * 32;

    asm volatile ( "call *%[entry]"
                   : "=a" (ret), "+b" (a1), "+c" (a2), "+d" (a3), [entry] "+S" (entry)
                   :
                   : "memory", "edi" );
    return ret;
}

static inline void cpuid(uint32_t leaf, uint32_t *a, uint32_t *b, uint32_t *c,
                         uint32_t *d)
{
    asm volatile ( "cpuid"
                   : "=a" (*a), "=b" (*b), "=c" (*c), "=d" (*d)
                   : "a" (leaf), "c" (0) );
}

static inline uint64_t rdtsc(void)
{
    uint32_t lo, hi;

    asm volatile ( "rdtsc" : "=a" (lo), "=d" (hi) );
    return ((uint64_t)hi << 32) | lo;
}

static inline void wrmsr(uint32_t msr, uint64_t val)
{
    asm volatile ( "wrmsr" :: "c" (msr), "a" ((uint32_t)val),
                   "d" ((uint32_t)(val >> 32)) );
}

static inline uint32_t apic_read(uint32_t reg)
{
    return *(volatile uint32_t *)(APIC_BASE + reg);
}

static inline void apic_write(uint32_t reg, uint32_t val)
{
    *(volatile uint32_t *)(APIC_BASE + reg) = val;
}

static inline void outb(uint16_t port, uint8_t val)
{
    asm volatile ( "outb %0, %1" :: "a" (val), "Nd" (port) );
}

static inline uint8_t inb(uint16_t port)
{
    uint8_t val;

    asm volatile ( "inb %1, %0" : "=a" (val) : "Nd" (port) );
    return val;
}

static inline uint32_t inl(uint16_t port)
{
    uint32_t val;

    asm volatile ( "inl %1, %0" : "=a" (val) : "Nd" (port) );
    return val;
}

static inline uint64_t hvm_param(uint32_t index)
{
    struct xen_hvm_param p = { DOMID_SELF, 0, index, 0 };

    hypercall2(__HYPERVISOR_hvm_op, HVMOP_get_param, (long)&p);
    return p.value;
}

/*
 * The hypercall page, at the MSR Xen's CPUID leaves name, and the console;
 * the TSC's kHz (CPUID leaf 0x40000003), which Xen reports in the guest's
 * time.
 */
static inline uint32_t guest_init(void)
{
    uint32_t a, b, c, d;

    cpuid(0x40000002, &a, &b, &c, &d);
    asm volatile ( "wrmsr" :: "c" (b), "a" ((uint32_t)hypercall_page),
                   "d" (0) );
    cons = (void *)(uint32_t)(hvm_param(HVM_PARAM_CONSOLE_PFN) << 12);
    cons_port = hvm_param(HVM_PARAM_CONSOLE_EVTCHN);
    cpuid(0x40000003, &a, &b, &c, &d);
    return c;
}

static inline void notify(void)
{
    uint32_t port = cons_port;

    hypercall2(__HYPERVISOR_event_channel_op, EVTCHNOP_send, (long)&port);
}

static inline void putstr(const char *s)
{
    for ( ; *s; s++ )
    {
        while ( cons->out_prod - cons->out_cons >= sizeof(cons->out) )
        {
            notify();
            hypercall2(__HYPERVISOR_sched_op, SCHEDOP_yield, 0);
        }
        cons->out[cons->out_prod & (sizeof(cons->out) - 1)] = *s;
        asm volatile ( "sfence" ::: "memory" );
        cons->out_prod++;
    }
    notify();
}

static inline void putnum(uint64_t v)
{
    char buf[24];
    int i = 23;

    buf[i] = 0;
    do {
        buf[--i] = '0' + (char)(v % 10);
        v /= 10;
    } while ( v );
    putstr(buf + i);
}

/* One record on the console: "TAG n1 n2\n". */
static inline void putrec(const char *tag, uint64_t n1, uint64_t n2)
{
    putstr(tag);
    putstr(" ");
    putnum(n1);
    putstr(" ");
    putnum(n2);
    putstr("\n");
}

/*
 * Wait for interrupts, taking them, until records *printed to until-1 of
 * tsc_at[], which the handler fills as *ticks counts up, are printed as
 * "tag index tsc".
 */
static inline void print_ticks(const char *tag, unsigned int *printed,
                               unsigned int until,
                               const volatile unsigned int *ticks,
                               const volatile uint64_t *tsc_at)
{
    while ( *printed < until )
    {
        asm volatile ( "sti; hlt; cli" ::: "memory" );
        for ( ; *printed < *ticks && *printed < until; (*printed)++ )
            putrec(tag, *printed, tsc_at[*printed]);
    }
}

static inline void set_gate(unsigned int vector, void (*handler)(void))
{
    uint32_t off = (uint32_t)handler;

    /* A 32-bit interrupt gate to the flat code segment (0x08). */
    idt[vector] = ((uint64_t)((off & 0xffff0000u) | 0x8e00u) << 32) |
                  ((0x08u << 16) | (off & 0xffffu));
}

static inline void load_idt(void)
{
    struct { uint16_t limit; uint32_t base; } __attribute__((packed)) idtr = {
        sizeof(idt) - 1, (uint32_t)idt };

    asm volatile ( "lidt %0" :: "m" (idtr) );
}

static inline void __attribute__((noreturn)) poweroff(void)
{
    hypercall2(__HYPERVISOR_sched_op, SCHEDOP_shutdown,
               (long)&(uint32_t){ SHUTDOWN_poweroff });
    for ( ; ; )
        asm volatile ( "cli; hlt" );
}

#endif /* SELENA_GUEST32_H */

/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * lapicguest: a minimal 32-bit PVH guest that takes the interrupts of its
 * local APIC timer, which Xen emulates through its platform timers
 * (hvm/vpt.c) and which Linux on PVH leaves unused (it takes the Xen timer
 * hypercalls): first in periodic mode, then in one-shot mode re-armed from
 * the interrupt, 10 ms of guest time each.  For each interrupt it prints
 * the guest's TSC (emulated, so in the guest's time), on its console:
 *     KHZ <the TSC's kHz, CPUID leaf 0x40000003>
 *     P <index> <tsc>        periodic
 *     O <index> <tsc>        one-shot
 *     DONE
 * then powers off.  Arguments: none (the counts below).
 */
#include <stdint.h>

#define NPERIODIC      40
#define NONESHOT       20
#define TIMER_VECTOR   0x40
/* Xen's virtual LAPIC bus runs at 100 MHz (APIC_BUS_CYCLE_NS): 10 ms. */
#define PERIOD_COUNT   1000000u

#define APIC_BASE      0xfee00000u
#define APIC_EOI       0x0b0
#define APIC_SVR       0x0f0
#define APIC_LVTT      0x320
#define APIC_TMICT     0x380
#define APIC_TDCR      0x3e0
#define APIC_SVR_ON    (1u << 8)
#define LVTT_PERIODIC  (1u << 17)
#define TDCR_DIV_1     0xb

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

extern char hypercall_page[4096];
extern void timer_entry(void);

static volatile struct xencons *cons;
static uint32_t cons_port;
static uint64_t idt[256] __attribute__((aligned(8)));
static volatile unsigned int ticks;
static volatile int oneshot;
static volatile uint64_t tsc_at[NPERIODIC + NONESHOT];

static long hypercall2(unsigned int nr, long a1, long a2)
{
    long ret;
    void *entry = hypercall_page + nr * 32;

    asm volatile ( "call *%[entry]"
                   : "=a" (ret), "+b" (a1), "+c" (a2), [entry] "+d" (entry)
                   :
                   : "memory", "esi", "edi" );
    return ret;
}

static void cpuid(uint32_t leaf, uint32_t *a, uint32_t *b, uint32_t *c,
                  uint32_t *d)
{
    asm volatile ( "cpuid"
                   : "=a" (*a), "=b" (*b), "=c" (*c), "=d" (*d)
                   : "a" (leaf), "c" (0) );
}

static uint64_t rdtsc(void)
{
    uint32_t lo, hi;

    asm volatile ( "rdtsc" : "=a" (lo), "=d" (hi) );
    return ((uint64_t)hi << 32) | lo;
}

static uint32_t apic_read(uint32_t reg)
{
    return *(volatile uint32_t *)(APIC_BASE + reg);
}

static void apic_write(uint32_t reg, uint32_t val)
{
    *(volatile uint32_t *)(APIC_BASE + reg) = val;
}

static uint64_t hvm_param(uint32_t index)
{
    struct xen_hvm_param p = { DOMID_SELF, 0, index, 0 };

    hypercall2(__HYPERVISOR_hvm_op, HVMOP_get_param, (long)&p);
    return p.value;
}

static void notify(void)
{
    uint32_t port = cons_port;

    hypercall2(__HYPERVISOR_event_channel_op, EVTCHNOP_send, (long)&port);
}

static void putstr(const char *s)
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

static void putnum(uint64_t v)
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

/* Called from timer_entry (head.S) with interrupts off. */
void timer_interrupt(void)
{
    if ( ticks < NPERIODIC + NONESHOT )
        tsc_at[ticks] = rdtsc();
    ticks++;
    if ( oneshot && ticks < NPERIODIC + NONESHOT )
        apic_write(APIC_TMICT, PERIOD_COUNT);
    apic_write(APIC_EOI, 0);
}

static void set_gate(unsigned int vector, void (*handler)(void))
{
    uint32_t off = (uint32_t)handler;

    /* A 32-bit interrupt gate to the flat code segment (0x08). */
    idt[vector] = ((uint64_t)((off & 0xffff0000u) | 0x8e00u) << 32) |
                  ((0x08u << 16) | (off & 0xffffu));
}

static void wait_ticks(unsigned int until, const char *tag,
                       unsigned int *printed)
{
    while ( *printed < until )
    {
        asm volatile ( "sti; hlt; cli" ::: "memory" );
        while ( *printed < ticks && *printed < until )
        {
            putstr(tag);
            putnum(*printed);
            putstr(" ");
            putnum(tsc_at[*printed]);
            putstr("\n");
            (*printed)++;
        }
    }
}

void start(void)
{
    struct { uint16_t limit; uint32_t base; } __attribute__((packed)) idtr = {
        sizeof(idt) - 1, (uint32_t)idt };
    uint32_t a, b, c, d;
    unsigned int printed = 0;

    /* The hypercall page, at the MSR Xen's CPUID leaves name. */
    cpuid(0x40000002, &a, &b, &c, &d);
    asm volatile ( "wrmsr" :: "c" (b), "a" ((uint32_t)hypercall_page),
                   "d" (0) );
    cons = (void *)(uint32_t)(hvm_param(HVM_PARAM_CONSOLE_PFN) << 12);
    cons_port = hvm_param(HVM_PARAM_CONSOLE_EVTCHN);

    cpuid(0x40000003, &a, &b, &c, &d);
    putstr("KHZ ");
    putnum(c);
    putstr("\n");

    set_gate(TIMER_VECTOR, timer_entry);
    asm volatile ( "lidt %0" :: "m" (idtr) );

    apic_write(APIC_SVR, apic_read(APIC_SVR) | APIC_SVR_ON | 0xff);
    apic_write(APIC_TDCR, TDCR_DIV_1);
    apic_write(APIC_LVTT, TIMER_VECTOR | LVTT_PERIODIC);
    apic_write(APIC_TMICT, PERIOD_COUNT);
    wait_ticks(NPERIODIC, "P ", &printed);

    /* One-shot: the handler re-arms it, 10 ms from each interrupt. */
    apic_write(APIC_TMICT, 0);
    oneshot = 1;
    ticks = NPERIODIC;
    apic_write(APIC_LVTT, TIMER_VECTOR);
    apic_write(APIC_TMICT, PERIOD_COUNT);
    wait_ticks(NPERIODIC + NONESHOT, "O ", &printed);

    apic_write(APIC_TMICT, 0);
    putstr("DONE\n");
    hypercall2(__HYPERVISOR_sched_op, SCHEDOP_shutdown,
               (long)&(uint32_t){ SHUTDOWN_poweroff });
    for ( ; ; )
        asm volatile ( "cli; hlt" );
}

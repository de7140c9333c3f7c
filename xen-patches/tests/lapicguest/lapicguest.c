/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * lapicguest: a minimal 32-bit PVH guest that takes the interrupts of its
 * local APIC timer, which Xen emulates through its platform timers
 * (hvm/vpt.c) and which Linux on PVH leaves unused (it takes the Xen timer
 * hypercalls): first in periodic mode, then in one-shot mode re-armed from
 * the interrupt, then in TSC-deadline mode re-armed likewise, 10 ms of guest
 * time each.  TSC-deadline mode runs whether CPUID offers it or not: Xen's
 * vLAPIC emulates it in software (vlapic_tdt_msr_set(), whatever the CPU
 * has), so a CPU without it, such as QEMU's software one, still takes the
 * path a guest on a CPU with it would.  For each interrupt it prints the
 * guest's TSC (emulated, so in the guest's time), on its console:
 *     KHZ <the TSC's kHz, CPUID leaf 0x40000003>
 *     P <index> <tsc>        periodic
 *     O <index> <tsc>        one-shot
 *     CPUID TSC-DEADLINE <0 or 1: whether CPUID offers the mode>
 *     D <index> <tsc>        TSC-deadline
 *     T <index> <tsc>        Xen's periodic timer (VCPUOP_set_periodic_timer,
 *                            10 ms), its VIRQ_TIMER events seen in the
 *                            shared info: the timer hypercall Linux on PVH
 *                            does not use
 *     DONE
 * then powers off.  Arguments: none (the counts below).
 */
#include "../guest32.h"

#define NPERIODIC      40
#define NONESHOT       20
#define NDEADLINE      20
#define NTICKS         (NPERIODIC + NONESHOT + NDEADLINE)
#define NHYPERCALL     20
#define TIMER_VECTOR   0x40
#define __HYPERVISOR_memory_op  12
#define __HYPERVISOR_vcpu_op    24
#define XENMEM_add_to_physmap   7
#define XENMAPSPACE_shared_info 0
#define VCPUOP_set_periodic_timer  6
#define VCPUOP_stop_periodic_timer 7
#define EVTCHNOP_bind_virq      1
#define VIRQ_TIMER              0
/* The 32-bit shared info (the hypercall page latched this guest's mode). */
#define SHINFO_EVTCHN_PENDING   2048
#define PERIOD_COUNT   (APIC_BUS_HZ / 100)      /* 10 ms */

extern void timer_entry(void);

static volatile unsigned int ticks, rearm_until;
static volatile int oneshot, deadline;
static uint64_t deadline_period;        /* TSC ticks in 10 ms */
static volatile uint64_t tsc_at[NTICKS];
/* Replaced by the shared info page: its RAM is given back to Xen. */
static uint8_t shared_info[4096] __attribute__((aligned(4096)));

/*
 * Xen's periodic timer: VIRQ_TIMER bound to a port, each event waited for
 * by yielding (the timer runs only while its vCPU does: Xen stops it when
 * the vCPU blocks, so polling for it would wait forever) until its
 * pending bit is set, then the bit cleared (no event upcall needed).
 */
static void take_periodic_timer_events(void)
{
    struct { uint16_t domid, size; uint32_t space, idx, gpfn; } map = {
        DOMID_SELF, 0, XENMAPSPACE_shared_info, 0,
        (uint32_t)shared_info >> 12 };
    struct { uint32_t virq, vcpu, port; } bind = { VIRQ_TIMER, 0, 0 };
    uint64_t period_ns = 10000000;
    volatile uint32_t *pending =
        (volatile uint32_t *)(shared_info + SHINFO_EVTCHN_PENDING);
    uint64_t now;
    unsigned int i;

    if ( hypercall2(__HYPERVISOR_memory_op, XENMEM_add_to_physmap, (long)&map) ||
         hypercall2(__HYPERVISOR_event_channel_op, EVTCHNOP_bind_virq,
                    (long)&bind) )
    {
        putstr("NO PERIODIC TIMER\n");
        return;
    }
    if ( hypercall3(__HYPERVISOR_vcpu_op, VCPUOP_set_periodic_timer, 0,
                    (long)&period_ns) )
    {
        putstr("NO PERIODIC TIMER\n");
        return;
    }
    for ( i = 0; i < NHYPERCALL; i++ )
    {
        while ( !(pending[bind.port / 32] & (1u << (bind.port % 32))) )
            hypercall2(__HYPERVISOR_sched_op, SCHEDOP_yield, 0);
        now = rdtsc();
        __atomic_and_fetch(&pending[bind.port / 32], ~(1u << (bind.port % 32)),
                           __ATOMIC_SEQ_CST);
        putrec("T", i, now);
    }
    hypercall3(__HYPERVISOR_vcpu_op, VCPUOP_stop_periodic_timer, 0, 0);
}

/* Called from timer_entry (head.S) with interrupts off. */
void timer_interrupt(void)
{
    uint64_t now = rdtsc();

    if ( ticks < NTICKS )
        tsc_at[ticks] = now;
    ticks++;
    if ( oneshot && ticks < rearm_until )
        apic_write(APIC_TMICT, PERIOD_COUNT);
    if ( deadline && ticks < rearm_until )
        wrmsr(MSR_TSC_DEADLINE, now + deadline_period);
    apic_write(APIC_EOI, 0);
}

void start(void)
{
    uint32_t khz = guest_init();        /* before any output */
    unsigned int printed = 0;
    uint32_t a, b, c, d;

    putstr("KHZ ");
    putnum(khz);
    putstr("\n");

    set_gate(TIMER_VECTOR, timer_entry);
    load_idt();

    apic_write(APIC_SVR, apic_read(APIC_SVR) | APIC_SVR_ON | 0xff);
    apic_write(APIC_TDCR, TDCR_DIV_1);
    apic_write(APIC_LVTT, TIMER_VECTOR | LVTT_PERIODIC);
    apic_write(APIC_TMICT, PERIOD_COUNT);
    print_ticks("P", &printed, NPERIODIC, &ticks, tsc_at);

    /* One-shot: the handler re-arms it, 10 ms from each interrupt. */
    apic_write(APIC_TMICT, 0);
    rearm_until = NPERIODIC + NONESHOT;
    oneshot = 1;
    ticks = NPERIODIC;
    apic_write(APIC_LVTT, TIMER_VECTOR);
    apic_write(APIC_TMICT, PERIOD_COUNT);
    print_ticks("O", &printed, NPERIODIC + NONESHOT, &ticks, tsc_at);
    apic_write(APIC_TMICT, 0);
    oneshot = 0;

    /* TSC-deadline: the deadline is in the guest's (emulated) TSC. */
    cpuid(1, &a, &b, &c, &d);
    putstr((c & CPUID1_ECX_TSC_DEADLINE) ? "CPUID TSC-DEADLINE 1\n"
                                         : "CPUID TSC-DEADLINE 0\n");
    deadline_period = (uint64_t)khz * 10;
    rearm_until = NTICKS;
    ticks = NPERIODIC + NONESHOT;
    deadline = 1;
    apic_write(APIC_LVTT, TIMER_VECTOR | LVTT_DEADLINE);
    wrmsr(MSR_TSC_DEADLINE, rdtsc() + deadline_period);
    print_ticks("D", &printed, NTICKS, &ticks, tsc_at);
    wrmsr(MSR_TSC_DEADLINE, 0);

    take_periodic_timer_events();

    putstr("DONE\n");
    poweroff();
}

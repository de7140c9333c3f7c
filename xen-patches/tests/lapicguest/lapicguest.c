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
#include "../guest32.h"

#define NPERIODIC      40
#define NONESHOT       20
#define TIMER_VECTOR   0x40
#define PERIOD_COUNT   (APIC_BUS_HZ / 100)      /* 10 ms */

extern void timer_entry(void);

static volatile unsigned int ticks;
static volatile int oneshot;
static volatile uint64_t tsc_at[NPERIODIC + NONESHOT];

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

static void wait_ticks(unsigned int until, const char *tag,
                       unsigned int *printed)
{
    while ( *printed < until )
    {
        asm volatile ( "sti; hlt; cli" ::: "memory" );
        while ( *printed < ticks && *printed < until )
        {
            putrec(tag, *printed, tsc_at[*printed]);
            (*printed)++;
        }
    }
}

void start(void)
{
    uint32_t khz = guest_init();        /* before any output */
    unsigned int printed = 0;

    putstr("KHZ ");
    putnum(khz);
    putstr("\n");

    set_gate(TIMER_VECTOR, timer_entry);
    load_idt();

    apic_write(APIC_SVR, apic_read(APIC_SVR) | APIC_SVR_ON | 0xff);
    apic_write(APIC_TDCR, TDCR_DIV_1);
    apic_write(APIC_LVTT, TIMER_VECTOR | LVTT_PERIODIC);
    apic_write(APIC_TMICT, PERIOD_COUNT);
    wait_ticks(NPERIODIC, "P", &printed);

    /* One-shot: the handler re-arms it, 10 ms from each interrupt. */
    apic_write(APIC_TMICT, 0);
    oneshot = 1;
    ticks = NPERIODIC;
    apic_write(APIC_LVTT, TIMER_VECTOR);
    apic_write(APIC_TMICT, PERIOD_COUNT);
    wait_ticks(NPERIODIC + NONESHOT, "O", &printed);

    apic_write(APIC_TMICT, 0);
    putstr("DONE\n");
    poweroff();
}

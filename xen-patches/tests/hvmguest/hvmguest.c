/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * hvmguest: a minimal 32-bit guest of a full HVM domain without a device
 * model (started by hvm-launch, tests/hvm_launch.c), that measures the time
 * sources Xen itself emulates for HVM guests against its own TSC (emulated,
 * so in the guest's time).  One after the other it takes NTICKS interrupts
 * of each periodic source:
 *     PIT <i> <tsc>    8254 channel 0, mode 2, PIT_COUNT (10.0002 ms), IRQ 0
 *     RTC <i> <tsc>    RTC periodic interrupt, rate RTC_RATE (7.8125 ms), IRQ 8
 *     HPET <i> <tsc>   HPET timer 0 periodic, 10 ms, legacy route (IRQ 0)
 *     LAPIC <i> <tsc>  LAPIC timer periodic, 10 ms
 *     TSCDL <i> <tsc>  LAPIC timer in TSC-deadline mode, deadlines 10 ms of
 *                      the TSC apart (run whether CPUID offers the mode or
 *                      not: Xen's vLAPIC emulates it either way)
 * (ISA IRQs through the 8259 pair, the LAPIC's LVT0 in ExtINT mode), then
 * reads the free-running counters every SAMPLE_MS of guest time for
 * NSAMPLES periods:
 *     PM <tsc> <value>     ACPI PM timer (3.579545 MHz, 32 bits) at PM_TMR_PORT
 *     HPETC <tsc> <value>  HPET main counter, low 32 bits
 * and the CMOS seconds register's next NEDGES changes:
 *     RTCS <i> <tsc>
 * all after
 *     KHZ <the TSC's kHz, CPUID leaf 0x40000003>
 *     HPETFS <the HPET counter's period in fs, its capabilities register>
 * and before DONE, then powers off.
 */
#include "../guest32.h"

#define NTICKS        51        /* the first comes at an arbitrary phase */
#define NSAMPLES      50
#define SAMPLE_MS     10
#define NEDGES        3

#define PIC1_CMD      0x20
#define PIC1_DATA     0x21
#define PIC2_CMD      0xa0
#define PIC2_DATA     0xa1
#define PIC_EOI       0x20
#define PIC1_VECTOR   0x20      /* IRQ 0-7 */
#define PIC2_VECTOR   0x28      /* IRQ 8-15 */
#define LAPIC_VECTOR  0x40
#define LVT_MASKED    (1u << 16)
#define LVT_EXTINT    (7u << 8)

#define PIT_CH0       0x40
#define PIT_CMD       0x43
#define PIT_COUNT     11932     /* of 1193182 Hz: 10.000151 ms */

#define CMOS_INDEX    0x70
#define CMOS_DATA     0x71
#define RTC_SECONDS   0x00
#define RTC_REG_A     0x0a
#define RTC_REG_B     0x0b
#define RTC_REG_C     0x0c
#define RTC_DV_32KHZ  0x20
#define RTC_RATE      9         /* 32768 Hz >> (9 - 1) = 128 Hz */
#define RTC_PIE       0x40

#define HPET_BASE     0xfed00000u
#define HPET_PERIOD   0x004     /* high half of the capabilities: fs */
#define HPET_CFG      0x010
#define HPET_COUNTER  0x0f0
#define HPET_T0_CFG   0x100
#define HPET_T0_CMP   0x108
#define HPET_ENABLE   (1u << 0)
#define HPET_LEGACY   (1u << 1)
#define HPET_TN_ENABLE   (1u << 2)
#define HPET_TN_PERIODIC (1u << 3)
#define HPET_TN_SETVAL   (1u << 6)
#define HPET_TN_32BIT    (1u << 8)

/* Xen's default ACPI I/O ports (HVM_PARAM_ACPI_IOPORTS_LOCATION 0). */
#define PM_TMR_PORT   0x1f48

extern void irq0_entry(void), irq8_entry(void), lapic_entry(void),
    other_entry(void);

static volatile unsigned int ticks;
static volatile uint64_t tsc_at[NTICKS];
static volatile int deadline_mode;
static uint64_t next_deadline, deadline_period;

static void tick(void)
{
    if ( ticks < NTICKS )
        tsc_at[ticks] = rdtsc();
    ticks++;
}

static uint8_t cmos_read(uint8_t index)
{
    outb(CMOS_INDEX, index);
    return inb(CMOS_DATA);
}

static void cmos_write(uint8_t index, uint8_t val)
{
    outb(CMOS_INDEX, index);
    outb(CMOS_DATA, val);
}

static uint32_t hpet_read(uint32_t reg)
{
    return *(volatile uint32_t *)(HPET_BASE + reg);
}

static void hpet_write(uint32_t reg, uint32_t val)
{
    *(volatile uint32_t *)(HPET_BASE + reg) = val;
}

/* The interrupt handlers, called from head.S with interrupts off. */
void irq0_interrupt(void)
{
    tick();
    outb(PIC1_CMD, PIC_EOI);
}

void irq8_interrupt(void)
{
    tick();
    cmos_read(RTC_REG_C);               /* acknowledges it in the RTC */
    outb(PIC2_CMD, PIC_EOI);
    outb(PIC1_CMD, PIC_EOI);
}

void lapic_interrupt(void)
{
    tick();
    /*
     * Each deadline a period after the last one, not after the interrupt:
     * their mean spacing is then the period whatever the delivery latency.
     */
    if ( deadline_mode && ticks < NTICKS )
    {
        next_deadline += deadline_period;
        wrmsr(MSR_TSC_DEADLINE, next_deadline);
    }
    apic_write(APIC_EOI, 0);
}

void other_interrupt(void)
{
    outb(PIC2_CMD, PIC_EOI);
    outb(PIC1_CMD, PIC_EOI);
}

/* Counted as a plain loop: the guest has no libgcc for 64-bit division. */
static uint64_t udiv64(uint64_t n, uint32_t d)
{
    uint64_t q = 0, r = 0;
    int i;

    for ( i = 63; i >= 0; i-- )
    {
        r = (r << 1) | ((n >> i) & 1);
        if ( r >= d )
        {
            r -= d;
            q |= 1ull << i;
        }
    }
    return q;
}

/* NTICKS interrupts of the source just started, each printed as it comes. */
static void take_ticks(const char *tag)
{
    unsigned int printed = 0;

    print_ticks(tag, &printed, NTICKS, &ticks, tsc_at);
}

static void pic_mask(uint8_t master, uint8_t slave)
{
    outb(PIC1_DATA, master);
    outb(PIC2_DATA, slave);
}

static void pic_init(void)
{
    static const uint8_t icw[2][4] = {
        { 0x11, PIC1_VECTOR, 0x04, 0x01 },   /* cascade on IRQ 2, 8086 mode */
        { 0x11, PIC2_VECTOR, 0x02, 0x01 },
    };
    unsigned int i;

    for ( i = 0; i < 2; i++ )
    {
        uint16_t cmd = i ? PIC2_CMD : PIC1_CMD;

        outb(cmd, icw[i][0]);
        outb(cmd + 1, icw[i][1]);
        outb(cmd + 1, icw[i][2]);
        outb(cmd + 1, icw[i][3]);
    }
    pic_mask(0xff, 0xff);
}

static uint32_t read_pm(void)
{
    return inl(PM_TMR_PORT);
}

static uint32_t read_hpet(void)
{
    return hpet_read(HPET_COUNTER);
}

static void sample(const char *tag, uint32_t (*read)(void), uint32_t khz)
{
    uint64_t next = rdtsc(), t;
    unsigned int i;

    for ( i = 0; i <= NSAMPLES; i++ )
    {
        while ( rdtsc() < next )
            ;
        t = rdtsc();
        putrec(tag, t, read());
        next += (uint64_t)khz * SAMPLE_MS;
    }
}

void start(void)
{
    uint32_t khz = guest_init(), hpet_fs = hpet_read(HPET_PERIOD);
    uint8_t reg_b, sec, now;
    unsigned int v;

    putstr("KHZ ");
    putnum(khz);
    putstr("\nHPETFS ");
    putnum(hpet_fs);
    putstr("\n");

    for ( v = PIC1_VECTOR; v < PIC2_VECTOR + 8; v++ )
        set_gate(v, other_entry);
    set_gate(PIC1_VECTOR, irq0_entry);
    set_gate(PIC2_VECTOR, irq8_entry);
    set_gate(LAPIC_VECTOR, lapic_entry);
    load_idt();

    /* The 8259's output reaches the CPU through LVT0 in ExtINT mode. */
    apic_write(APIC_SVR, apic_read(APIC_SVR) | APIC_SVR_ON | 0xff);
    apic_write(APIC_LVTT, LVT_MASKED);
    apic_write(APIC_LVT0, LVT_EXTINT);
    pic_init();

    /* PIT channel 0: binary, low then high byte, mode 2 (rate generator). */
    ticks = 0;
    outb(PIT_CMD, 0x34);
    outb(PIT_CH0, PIT_COUNT & 0xff);
    outb(PIT_CH0, PIT_COUNT >> 8);
    pic_mask(0xfe, 0xff);
    take_ticks("PIT");
    pic_mask(0xff, 0xff);

    /* RTC periodic interrupt. */
    ticks = 0;
    cmos_write(RTC_REG_A, RTC_DV_32KHZ | RTC_RATE);
    reg_b = cmos_read(RTC_REG_B);
    cmos_write(RTC_REG_B, reg_b | RTC_PIE);
    cmos_read(RTC_REG_C);
    pic_mask(0xfb, 0xfe);
    take_ticks("RTC");
    pic_mask(0xff, 0xff);
    cmos_write(RTC_REG_B, reg_b & ~RTC_PIE);

    /*
     * HPET timer 0, periodic, 32-bit, 10 ms: the first write of the
     * comparator (SETVAL) sets its value, the second its period; the
     * legacy replacement route takes IRQ 0 from the PIT.
     */
    ticks = 0;
    hpet_write(HPET_CFG, 0);
    hpet_write(HPET_T0_CFG, HPET_TN_ENABLE | HPET_TN_PERIODIC |
                            HPET_TN_SETVAL | HPET_TN_32BIT);
    hpet_write(HPET_T0_CMP, udiv64(10000000000000ull, hpet_fs));
    hpet_write(HPET_T0_CMP, udiv64(10000000000000ull, hpet_fs));
    pic_mask(0xfe, 0xff);
    hpet_write(HPET_CFG, HPET_ENABLE | HPET_LEGACY);
    take_ticks("HPET");
    pic_mask(0xff, 0xff);
    hpet_write(HPET_T0_CFG, 0);         /* the main counter keeps running */

    /* LAPIC timer, periodic. */
    ticks = 0;
    apic_write(APIC_TDCR, TDCR_DIV_1);
    apic_write(APIC_LVTT, LAPIC_VECTOR | LVTT_PERIODIC);
    apic_write(APIC_TMICT, APIC_BUS_HZ / 100);
    take_ticks("LAPIC");
    apic_write(APIC_TMICT, 0);

    /* LAPIC timer, TSC-deadline mode: deadlines in the guest's TSC. */
    ticks = 0;
    deadline_period = (uint64_t)khz * 10;
    apic_write(APIC_LVTT, LAPIC_VECTOR | LVTT_DEADLINE);
    next_deadline = rdtsc() + deadline_period;
    deadline_mode = 1;
    wrmsr(MSR_TSC_DEADLINE, next_deadline);
    take_ticks("TSCDL");
    deadline_mode = 0;
    wrmsr(MSR_TSC_DEADLINE, 0);
    apic_write(APIC_LVTT, LVT_MASKED);

    sample("PM", read_pm, khz);
    sample("HPETC", read_hpet, khz);

    sec = cmos_read(RTC_SECONDS);
    for ( v = 0; v < NEDGES; )
    {
        now = cmos_read(RTC_SECONDS);
        if ( now != sec )
        {
            putrec("RTCS", v++, rdtsc());
            sec = now;
        }
    }

    putstr("DONE\n");
    poweroff();
}

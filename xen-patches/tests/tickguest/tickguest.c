/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * tickguest: a minimal 64-bit Xen PV guest that counts the ticks of its
 * default periodic timer (VIRQ_TIMER, 10 ms of guest time by default for
 * every PV vCPU; Linux stops it at boot, so it takes a guest of our own to
 * see it) and prints on its console, for each tick, its index and the
 * guest's (dilated) system time read from the pvclock:
 *     K <index> <ns>
 *     DONE
 * then powers off.  It spins (the periodic timer runs only while its vCPU
 * runs), checks the event channel's pending bit, and never enables event
 * upcalls.  Arguments: none (NTICKS below).
 */
#include <stdint.h>

#define NTICKS 40

#define __HYPERVISOR_update_va_mapping 14
#define __HYPERVISOR_sched_op          29
#define __HYPERVISOR_event_channel_op  32
#define SCHEDOP_yield                  0
#define SCHEDOP_shutdown               2
#define SHUTDOWN_poweroff              0
#define EVTCHNOP_bind_virq             1
#define EVTCHNOP_send                  4
#define VIRQ_TIMER                     0
#define UVMF_INVLPG                    2
#define PTE_FLAGS                      7   /* present, writable, user */

struct vcpu_time_info {
    uint32_t version;
    uint32_t pad0;
    uint64_t tsc_timestamp;
    uint64_t system_time;
    uint32_t tsc_to_system_mul;
    int8_t tsc_shift;
    int8_t flags;
    int8_t pad1[2];
};

struct vcpu_info {
    uint8_t evtchn_upcall_pending;
    uint8_t evtchn_upcall_mask;
    uint8_t pad[6];
    uint64_t evtchn_pending_sel;
    uint8_t arch[16];                  /* cr2, pad */
    struct vcpu_time_info time;
};                                     /* 64 bytes */

struct shared_info {
    struct vcpu_info vcpu_info[32];
    uint64_t evtchn_pending[64];
    uint64_t evtchn_mask[64];
};

struct start_info {
    char magic[32];
    uint64_t nr_pages;
    uint64_t shared_info;              /* machine address */
    uint32_t flags;
    uint32_t pad;
    uint64_t store_mfn;
    uint32_t store_evtchn;
    uint32_t pad2;
    uint64_t console_mfn;
    uint32_t console_evtchn;
};

struct xencons {
    char in[1024];
    char out[2048];
    uint32_t in_cons, in_prod, out_cons, out_prod;
};

extern char hypercall_page[4096];
static char shared_page[4096] __attribute__((aligned(4096)));
static char console_page[4096] __attribute__((aligned(4096)));
static volatile struct shared_info *shinfo = (void *)shared_page;
static volatile struct xencons *cons = (void *)console_page;
static uint32_t cons_port;

static long hypercall3(unsigned int nr, long a1, long a2, long a3)
{
    register long r10 asm("r10") = 0;
    long ret;
    void *entry = hypercall_page + nr * 32;

    asm volatile ( "call *%[entry]"
                   : "=a" (ret), "+D" (a1), "+S" (a2), "+d" (a3), "+r" (r10)
                   : [entry] "r" (entry)
                   : "memory", "rcx", "r11", "r8", "r9" );
    return ret;
}

static void map(void *va, uint64_t maddr)
{
    hypercall3(__HYPERVISOR_update_va_mapping, (long)va,
               (long)(maddr | PTE_FLAGS), UVMF_INVLPG);
}

static void notify(uint32_t port)
{
    uint32_t arg = port;

    hypercall3(__HYPERVISOR_event_channel_op, EVTCHNOP_send, (long)&arg, 0);
}

static void putstr(const char *s)
{
    for ( ; *s; s++ )
    {
        while ( cons->out_prod - cons->out_cons >= sizeof(cons->out) )
        {
            notify(cons_port);
            hypercall3(__HYPERVISOR_sched_op, SCHEDOP_yield, 0, 0);
        }
        cons->out[cons->out_prod & (sizeof(cons->out) - 1)] = *s;
        asm volatile ( "sfence" ::: "memory" );
        cons->out_prod++;
    }
    notify(cons_port);
}

static void putnum(uint64_t v)
{
    char buf[24];
    int i = 23;

    buf[i] = 0;
    do {
        buf[--i] = '0' + v % 10;
        v /= 10;
    } while ( v );
    putstr(buf + i);
}

static uint64_t rdtsc(void)
{
    uint32_t lo, hi;

    asm volatile ( "rdtsc" : "=a" (lo), "=d" (hi) );
    return ((uint64_t)hi << 32) | lo;
}

/* The guest's system time from vCPU 0's pvclock. */
static uint64_t now_ns(void)
{
    volatile struct vcpu_time_info *t = &shinfo->vcpu_info[0].time;
    uint32_t version;
    uint64_t ns, delta;

    do {
        version = t->version;
        asm volatile ( "lfence" ::: "memory" );
        delta = rdtsc() - t->tsc_timestamp;
        if ( t->tsc_shift < 0 )
            delta >>= -t->tsc_shift;
        else
            delta <<= t->tsc_shift;
        ns = t->system_time +
             (uint64_t)(((unsigned __int128)delta * t->tsc_to_system_mul) >> 32);
        asm volatile ( "lfence" ::: "memory" );
    } while ( (version & 1) || version != t->version );
    return ns;
}

void start(struct start_info *si)
{
    struct { uint32_t virq, vcpu, port; } bind = { VIRQ_TIMER, 0, 0 };
    volatile uint64_t *pending;
    unsigned int i;

    map(shared_page, si->shared_info);
    map(console_page, si->console_mfn << 12);
    cons_port = si->console_evtchn;
    shinfo->vcpu_info[0].evtchn_upcall_mask = 1;   /* never an upcall */

    if ( hypercall3(__HYPERVISOR_event_channel_op, EVTCHNOP_bind_virq,
                    (long)&bind, 0) )
        putstr("bind_virq failed\n");
    pending = &shinfo->evtchn_pending[bind.port / 64];

    putstr("READY\n");
    for ( i = 0; i < NTICKS; i++ )
    {
        while ( !(*pending & (1ULL << (bind.port % 64))) )
            asm volatile ( "pause" );
        asm volatile ( "lock btrq %1, %0"
                       : "+m" (*pending) : "r" ((uint64_t)(bind.port % 64))
                       : "memory" );
        putstr("K ");
        putnum(i);
        putstr(" ");
        putnum(now_ns());
        putstr("\n");
    }
    putstr("DONE\n");
    hypercall3(__HYPERVISOR_sched_op, SCHEDOP_shutdown, (long)&(uint32_t){
                   SHUTDOWN_poweroff }, 0);
    for ( ; ; )
        ;
}

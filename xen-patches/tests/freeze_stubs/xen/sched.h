/*
 * Just enough of Xen for common/time_dilation.c as the series leaves it, in
 * user space (tests/test_freeze.c): domains, vCPUs, timers, locks and
 * pauses that count what is done to them.
 */
#ifndef FREEZE_STUB_SCHED_H
#define FREEZE_STUB_SCHED_H

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <xen/time_dilation.h>

typedef int64_t s_time_t;

#define ERESTART 85
#define STIME_MAX INT64_MAX
#define ACCESS_ONCE(x) (*(volatile __typeof__(x) *)&(x))
#define smp_rmb() __sync_synchronize()
#define smp_wmb() __sync_synchronize()
#define cpu_relax() ((void)0)
#define likely(x) (x)
#define unlikely(x) (x)
#define ASSERT(x) assert(x)

typedef struct { int held; } spinlock_t;
#define spin_lock(l) do { assert(!(l)->held); (l)->held = 1; } while ( 0 )
#define spin_unlock(l) do { assert((l)->held); (l)->held = 0; } while ( 0 )
#define spin_lock_irqsave(l, f) do { (f) = 0; spin_lock(l); } while ( 0 )
#define spin_unlock_irqrestore(l, f) do { (void)(f); spin_unlock(l); } while ( 0 )
#define spin_is_locked(l) ((l)->held)

struct timer { bool active; s_time_t expires; };
static inline bool timer_is_active(const struct timer *t) { return t->active; }
static inline void stop_timer(struct timer *t) { t->active = false; }
static inline void set_timer(struct timer *t, s_time_t e)
{
    t->active = true;
    t->expires = e;
}

struct vcpu_runstate_info {
    int state;
    uint64_t state_entry_time;
    uint64_t time[4];
};

#define _VPF_down 1
#define test_bit(nr, addr) ((*(addr) >> (nr)) & 1)

struct domain;
struct vcpu {
    struct domain *domain;
    struct vcpu *next_in_list;
    unsigned long pause_flags;
    struct timer singleshot_timer, poll_timer, periodic_timer;
    s_time_t tdf_singleshot_deadline, tdf_poll_deadline;
    bool tdf_time_stale;
    uint8_t tdf_rearm;
    struct vcpu_runstate_info tdf_runstate;
    unsigned int kicks;             /* vcpu_mark_events_pending() calls */
};

#define NR_DOMAIN_WATCHDOG_TIMERS 2
struct domain {
    struct vcpu *vcpu_list;
    spinlock_t watchdog_lock;
    uint32_t watchdog_inuse_map;
    struct timer watchdog_timer[NR_DOMAIN_WATCHDOG_TIMERS];
    s_time_t watchdog_deadline[NR_DOMAIN_WATCHDOG_TIMERS];
    unsigned int tdf_watchdog_rearm;
    struct tdf_anchor tdf;
    unsigned int tdf_seq;
    bool tdf_frozen, tdf_group_act, tdf_freeze_paused;
    spinlock_t tdf_lock, tdf_op_lock;
    bool creation_finished;
    int pause_count;                /* domain_pause() minus domain_unpause() */
    unsigned int arch_changes;      /* arch_domain_tdf_changed() calls */
    uint32_t arch_tdf_max;          /* arch_domain_tdf_max(), 0: no cap */
};

#define for_each_vcpu(d, v) for ( (v) = (d)->vcpu_list; (v); (v) = (v)->next_in_list )

/* Provided by the test. */
extern s_time_t test_now;
extern unsigned int test_preempt_every, test_preempt_calls;
#define NOW() (test_now)
#define cpu_khz 2000000UL

static inline void domain_pause(struct domain *d) { d->pause_count++; }
static inline void domain_unpause(struct domain *d)
{
    assert(d->pause_count > 0);
    d->pause_count--;
}
static inline bool hypercall_preempt_check(void)
{
    return test_preempt_every && ++test_preempt_calls % test_preempt_every == 0;
}
static inline void vcpu_mark_events_pending(struct vcpu *v) { v->kicks++; }

#endif

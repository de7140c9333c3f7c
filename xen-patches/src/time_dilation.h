/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Time dilation arithmetic.
 *
 * A dilated domain perceives time passing TDF times slower than real time.
 * The TDF is held in thousandths ("milli": 1000 = real time, 10000 = TDF 10).
 * Each domain has one anchor (real0, virt0): the real and virtual system
 * times at the last change of factor, so virtual time stays continuous
 * across changes:
 *
 *   virtual = virt0 + (real - real0) * 1000 / milli        (floor)
 *   real    = real0 + (virtual - virt0) * milli / 1000      (ceiling)
 *
 * Rounding is chosen so that a timer converted from a virtual deadline to a
 * real one never fires early in virtual time.
 *
 * A frozen anchor stops virtual time at virt0 from real0 on: no virtual
 * deadline after virt0 is ever reached until the anchor is thawed, and
 * thawing re-anchors at the thaw instant so no virtual time is lost.
 *
 * This header depends only on muldiv64() (xen/lib/muldiv64.c), so it can be
 * unit-tested in user space against a reference one.  The conversions take
 * guest-supplied deadlines, so they saturate instead of wrapping: muldiv64()
 * is only called once the quotient is known to fit in 64 bits (x86's divq
 * faults otherwise), and the remainder, recomputed from its quotient,
 * gives the rounding up.
 */
#ifndef __XEN_TIME_DILATION_H__
#define __XEN_TIME_DILATION_H__

#ifdef __XEN__
#include <xen/lib.h>
#include <xen/types.h>
#else
#include <stdint.h>
uint64_t muldiv64(uint64_t a, uint32_t b, uint32_t c);
#endif

#define TDF_MILLI_UNIT  1000U
#define TDF_MILLI_MIN   1000U
#define TDF_MILLI_MAX   1000000U

#define TDF_S64_MAX ((int64_t)(~0ULL >> 1))
#define TDF_S64_MIN (-TDF_S64_MAX - 1)

struct tdf_anchor {
    uint32_t milli;   /* factor in thousandths, TDF_MILLI_MIN..TDF_MILLI_MAX */
    uint32_t frozen;  /* non-zero: virtual time stands still at virt0 */
    int64_t real0;    /* real system time (ns) at the last change */
    int64_t virt0;    /* virtual system time (ns) at the same instant */
};

/*
 * (a * b) / c rounded down (round_up == 0) or up; saturates at ~0 when the
 * result does not fit in 64 bits, and for c == 0.
 */
static inline uint64_t tdf_muldiv(uint64_t a, uint32_t b, uint32_t c,
                                  int round_up)
{
    /* (a * b) >> 64: the quotient fits in 64 bits iff this is below c. */
    uint64_t top = ((a >> 32) * b + (((a & 0xffffffffULL) * b) >> 32)) >> 32;
    uint64_t q, r;

    if ( c == 0 || top >= c )
        return ~0ULL;

    q = muldiv64(a, b, c);
    r = a * b - q * c;          /* exact modulo 2^64: the remainder is < c */
    if ( round_up && r )
        return q == ~0ULL ? ~0ULL : q + 1;

    return q;
}

/* base + delta, clamped to the int64_t range. */
static inline int64_t tdf_add_sat(int64_t base, uint64_t delta)
{
    if ( delta > (uint64_t)TDF_S64_MAX - (uint64_t)base )
        return TDF_S64_MAX;
    return (int64_t)((uint64_t)base + delta);
}

/* base - delta, clamped to the int64_t range. */
static inline int64_t tdf_sub_sat(int64_t base, uint64_t delta)
{
    if ( delta > (uint64_t)base - (uint64_t)TDF_S64_MIN )
        return TDF_S64_MIN;
    return (int64_t)((uint64_t)base - delta);
}

static inline int tdf_milli_valid(uint64_t milli)
{
    return milli >= TDF_MILLI_MIN && milli <= TDF_MILLI_MAX;
}

/*
 * Largest factor a guest can be given on a CPU of cpu_khz: Linux keeps the
 * TSC frequency it derives from pvclock in an unsigned int of kHz, and the
 * dilated frequency is cpu_khz * TDF.
 */
static inline uint32_t tdf_milli_limit(uint32_t cpu_khz)
{
    uint64_t limit;

    if ( cpu_khz == 0 )
        return TDF_MILLI_MAX;
    limit = tdf_muldiv(0xffffffffULL, TDF_MILLI_UNIT, cpu_khz, 0);
    return limit < TDF_MILLI_MAX ? (uint32_t)limit : TDF_MILLI_MAX;
}

/* A frequency (kHz) as a dilated guest perceives it; saturates at 2^32-1. */
static inline uint32_t tdf_dilate_khz(uint32_t khz, uint32_t milli)
{
    uint64_t f = tdf_muldiv(khz, milli, TDF_MILLI_UNIT, 0);

    return f > 0xffffffffULL ? 0xffffffffU : (uint32_t)f;
}

static inline void tdf_anchor_init(struct tdf_anchor *a)
{
    a->milli = TDF_MILLI_UNIT;
    a->frozen = 0;
    a->real0 = 0;
    a->virt0 = 0;
}

/* An anchor that is an identity: the domain behaves as on unpatched Xen. */
static inline int tdf_is_identity(const struct tdf_anchor *a)
{
    return a->milli == TDF_MILLI_UNIT && a->real0 == a->virt0 && !a->frozen;
}

/* Virtual time (ns) at real system time 'real'. Monotonic in 'real'. */
static inline int64_t tdf_real_to_virt(const struct tdf_anchor *a,
                                       int64_t real)
{
    uint64_t d;

    if ( real >= a->real0 )
    {
        if ( a->frozen )
            return a->virt0;
        d = (uint64_t)real - (uint64_t)a->real0;
        return tdf_add_sat(a->virt0,
                           tdf_muldiv(d, TDF_MILLI_UNIT, a->milli, 0));
    }
    d = (uint64_t)a->real0 - (uint64_t)real;
    return tdf_sub_sat(a->virt0, tdf_muldiv(d, TDF_MILLI_UNIT, a->milli, 1));
}

/*
 * Real time (ns) at which virtual time reaches 'virt': the earliest real
 * time r with tdf_real_to_virt(r) >= virt, so a timer never fires early.
 * Never (TDF_S64_MAX) for a deadline after a frozen anchor's virt0.
 */
static inline int64_t tdf_virt_to_real(const struct tdf_anchor *a,
                                       int64_t virt)
{
    uint64_t d;

    if ( virt > a->virt0 && a->frozen )
        return TDF_S64_MAX;
    if ( virt >= a->virt0 )
    {
        d = (uint64_t)virt - (uint64_t)a->virt0;
        return tdf_add_sat(a->real0,
                           tdf_muldiv(d, a->milli, TDF_MILLI_UNIT, 1));
    }
    d = (uint64_t)a->virt0 - (uint64_t)virt;
    return tdf_sub_sat(a->real0, tdf_muldiv(d, a->milli, TDF_MILLI_UNIT, 0));
}

/* A virtual duration (ns) in real ns, rounded up; saturates. */
static inline uint64_t tdf_virt_span_to_real(const struct tdf_anchor *a,
                                             uint64_t span)
{
    return tdf_muldiv(span, a->milli, TDF_MILLI_UNIT, 1);
}

/* A real duration (ns) in virtual ns, rounded down. */
static inline uint64_t tdf_real_span_to_virt(const struct tdf_anchor *a,
                                             uint64_t span)
{
    return tdf_muldiv(span, TDF_MILLI_UNIT, a->milli, 0);
}

/*
 * Change the factor at real time 'now': virtual time continues from where
 * it is.  Going back to 1000 keeps the offset virt0 - real0, so "factor 1"
 * may still be a translation.  A frozen anchor stays frozen (at the same
 * virtual instant) and takes the new factor when thawed.
 */
static inline void tdf_rebase(struct tdf_anchor *a, int64_t now,
                              uint32_t milli)
{
    int64_t v = tdf_real_to_virt(a, now);

    a->real0 = now;
    a->virt0 = v;
    a->milli = milli;
}

/* Stop virtual time at its value at real time 'now'. */
static inline void tdf_freeze(struct tdf_anchor *a, int64_t now)
{
    tdf_rebase(a, now, a->milli);
    a->frozen = 1;
}

/* Restart frozen virtual time at real time 'now', from where it stopped. */
static inline void tdf_thaw(struct tdf_anchor *a, int64_t now)
{
    if ( !a->frozen )
        return;
    a->real0 = now;
    a->frozen = 0;
}

/*
 * Account the time a vCPU spent in its current run state, in virtual time:
 * '*entry' is the virtual time at which it entered the state and 'now' the
 * virtual time at which it leaves it.  Accumulating differences of virtual
 * instants (each taken with the anchor in force at that instant) counts
 * every stretch at the factor that was in force, gives nothing while
 * frozen, keeps every total monotonic, and keeps their sum at most the
 * virtual time elapsed since the first entry.
 */
static inline void tdf_account(uint64_t *total, int64_t *entry, int64_t now)
{
    if ( now > *entry )
    {
        *total += (uint64_t)now - (uint64_t)*entry;
        *entry = now;
    }
}

/*
 * A periodic timer kept in virtual time: given the virtual time of its last
 * event, its period and the virtual time now, whether an event is due now
 * (then '*last' moves to now) and the virtual time of the next event.
 */
static inline int64_t tdf_periodic_next(int64_t *last, uint64_t period,
                                        int64_t now, int *fire)
{
    int64_t next = tdf_add_sat(*last, period);

    *fire = now >= next;
    if ( *fire )
    {
        *last = now;
        next = tdf_add_sat(now, period);
    }
    return next;
}

/*
 * Dilate a pvclock TSC scale: guests compute
 *   ns = ((tsc_delta << shift) * mul) >> 32     (>> -shift if shift < 0)
 * Native TSC cannot be slowed, so divide the multiplier by the factor and
 * renormalise it into [2^31, 2^32) by lowering the shift.
 */
static inline void tdf_scale_tsc_mul(uint32_t *mul_frac, int8_t *shift,
                                     uint32_t milli)
{
    uint64_t m;
    int t = 32;

    if ( milli == TDF_MILLI_UNIT || *mul_frac == 0 )
        return;

    /* The new multiplier with 32 extra fraction bits; < 2^64 as milli >= 1000. */
    m = tdf_muldiv((uint64_t)*mul_frac << 32, TDF_MILLI_UNIT, milli, 0);
    while ( t > 0 && (m >> t) < 0x80000000ULL )
        t--;
    *mul_frac = (uint32_t)(m >> t);
    *shift = (int8_t)(*shift - (32 - t));
}

#endif /* __XEN_TIME_DILATION_H__ */

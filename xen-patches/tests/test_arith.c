/*
 * User-space tests of the time dilation arithmetic in src/time_dilation.h,
 * the header the patch series adds to Xen as xen/include/xen/time_dilation.h.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "time_dilation.h"
#include "muldiv64.h"

static int failures;

#define CHECK(cond, ...)                                              \
    do {                                                              \
        if ( !(cond) )                                                \
        {                                                             \
            if ( failures++ < 20 )                                    \
            {                                                         \
                fprintf(stderr, "%s:%d: FAIL %s: ", __FILE__,         \
                        __LINE__, #cond);                             \
                fprintf(stderr, __VA_ARGS__);                         \
                fputc('\n', stderr);                                  \
            }                                                         \
        }                                                             \
    } while ( 0 )

#define SEC  1000000000LL
#define YEAR (365LL * 24 * 3600 * SEC)

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void test_muldiv(void)
{
    uint64_t seed = 0x243f6a8885a308d3ULL;
    unsigned int k;

    CHECK(tdf_muldiv(10, 3, 4, 0) == 7, "floor");
    CHECK(tdf_muldiv(10, 3, 4, 1) == 8, "ceil");
    CHECK(tdf_muldiv(~0ULL, ~0U, 1, 0) == ~0ULL, "saturates");
    CHECK(tdf_muldiv(~0ULL, 2, 2, 0) == ~0ULL, "exact max");
    CHECK(tdf_muldiv(~0ULL, 2, 2, 1) == ~0ULL, "exact max, ceil");
    CHECK(tdf_muldiv(~0ULL - 1, 1000, 1001, 1) == 0xffbe878b6170458eULL,
          "ceil near the top: %" PRIx64, tdf_muldiv(~0ULL - 1, 1000, 1001, 1));
    CHECK(tdf_muldiv(1ULL << 63, 4, 2, 0) == ~0ULL, "quotient overflow");
    CHECK(tdf_muldiv(5, 5, 0, 0) == ~0ULL, "zero divisor");
    CHECK(tdf_muldiv(1ULL << 62, 1000, 1000, 0) == 1ULL << 62, "identity");
    /* The generic C arithmetic against a 128-bit reference. */
    for ( k = 0; k < 2000000; k++ )
    {
        uint64_t a = xorshift(&seed) >> (xorshift(&seed) % 64);
        uint32_t b = (uint32_t)(xorshift(&seed) >> (32 + xorshift(&seed) % 32));
        uint32_t c = (uint32_t)(xorshift(&seed) >> (32 + xorshift(&seed) % 32));
        unsigned __int128 p = (unsigned __int128)a * b, q, want_lo, want_hi;

        if ( c == 0 )
            continue;
        q = p / c;
        want_lo = q > ~0ULL ? ~0ULL : q;
        want_hi = q + (p % c != 0);
        want_hi = want_hi > ~0ULL ? ~0ULL : want_hi;
        CHECK(tdf_muldiv(a, b, c, 0) == (uint64_t)want_lo,
              "%" PRIx64 " * %u / %u", a, b, c);
        CHECK(tdf_muldiv(a, b, c, 1) == (uint64_t)want_hi,
              "ceil %" PRIx64 " * %u / %u", a, b, c);
    }
}

static void test_identity(void)
{
    struct tdf_anchor a;
    int64_t t;

    tdf_anchor_init(&a);
    CHECK(tdf_is_identity(&a), "fresh anchor is identity");
    for ( t = -5 * SEC; t < 100 * YEAR; t += YEAR / 7 + 12345 )
    {
        CHECK(tdf_real_to_virt(&a, t) == t, "t=%" PRId64, t);
        CHECK(tdf_virt_to_real(&a, t) == t, "t=%" PRId64, t);
    }
}

/* At an integer TDF n, virtual = real / n exactly for multiples of n. */
static void test_integer_exactness(void)
{
    static const uint32_t factors[] = { 1, 2, 3, 5, 10, 20, 100, 1000 };
    unsigned int i;
    int64_t t;

    for ( i = 0; i < sizeof(factors) / sizeof(factors[0]); i++ )
    {
        struct tdf_anchor a = { .milli = factors[i] * 1000 };
        int64_t n = factors[i];

        for ( t = 0; t < 100 * YEAR && t < (TDF_S64_MAX - n) / n;
              t += YEAR / 3 + 7 * SEC + 1 )
        {
            int64_t real = t * n;

            CHECK(tdf_real_to_virt(&a, real) == t, "n=%" PRId64, n);
            CHECK(tdf_virt_to_real(&a, t) == real, "n=%" PRId64, n);
            CHECK(tdf_real_to_virt(&a, real + n - 1) == t, "floor n=%" PRId64, n);
        }
        CHECK(tdf_virt_span_to_real(&a, SEC) == (uint64_t)(n * SEC), "span");
        CHECK(tdf_real_span_to_virt(&a, n * SEC) == (uint64_t)SEC, "span back");
    }
}

/* Over 100 years at every extreme and random inputs: no overflow, no fault. */
static void test_no_overflow(void)
{
    static const uint32_t factors[] = { TDF_MILLI_MIN, 2500, TDF_MILLI_MAX };
    static const int64_t extremes[] = {
        0, 1, -1, 100 * YEAR, -100 * YEAR, TDF_S64_MAX, TDF_S64_MIN,
        TDF_S64_MAX - 1, TDF_S64_MIN + 1,
    };
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    unsigned int i, j, k;

    for ( i = 0; i < 3; i++ )
    {
        for ( j = 0; j < sizeof(extremes) / sizeof(extremes[0]); j++ )
        {
            struct tdf_anchor a = { .milli = factors[i], .real0 = 50 * YEAR,
                                    .virt0 = 5 * YEAR };
            int64_t v = tdf_real_to_virt(&a, extremes[j]);
            int64_t r = tdf_virt_to_real(&a, extremes[j]);

            /* Saturation keeps results ordered like the inputs. */
            if ( extremes[j] >= a.real0 )
                CHECK(v >= a.virt0, "v=%" PRId64, v);
            else
                CHECK(v <= a.virt0, "v=%" PRId64, v);
            if ( extremes[j] >= a.virt0 )
                CHECK(r >= a.real0, "r=%" PRId64, r);
            else
                CHECK(r <= a.real0, "r=%" PRId64, r);
            (void)tdf_virt_span_to_real(&a, (uint64_t)extremes[j]);
        }
        /* 100 years of system time at the largest factor. */
        {
            struct tdf_anchor a = { .milli = factors[i] };
            int64_t v = tdf_real_to_virt(&a, 100 * YEAR);

            CHECK(v == (int64_t)tdf_muldiv(100 * YEAR, 1000, factors[i], 0),
                  "100y v=%" PRId64, v);
            CHECK(tdf_virt_to_real(&a, v) <= 100 * YEAR, "100y back");
            /* A guest asking for a timer 100 years (virtual) away saturates. */
            CHECK(tdf_virt_to_real(&a, TDF_S64_MAX) == TDF_S64_MAX ||
                  factors[i] == TDF_MILLI_MIN, "saturate");
        }
        for ( k = 0; k < 200000; k++ )
        {
            struct tdf_anchor a = {
                .milli = factors[i],
                .real0 = (int64_t)(xorshift(&seed) % (200 * YEAR)) - 100 * YEAR,
                .virt0 = (int64_t)(xorshift(&seed) % (200 * YEAR)) - 100 * YEAR,
            };
            int64_t x = (int64_t)xorshift(&seed);

            (void)tdf_real_to_virt(&a, x);
            (void)tdf_virt_to_real(&a, x);
        }
    }
}

/*
 * A timer never fires early: the real deadline maps back to >= the virtual
 * one, and is the earliest such real time.  Spans stay below saturation.
 */
static void test_round_trip(void)
{
    uint64_t seed = 12345;
    unsigned int k;

    for ( k = 0; k < 500000; k++ )
    {
        struct tdf_anchor a = {
            .milli = TDF_MILLI_MIN + xorshift(&seed) % (TDF_MILLI_MAX - TDF_MILLI_MIN + 1),
            .real0 = (int64_t)(xorshift(&seed) % (100 * YEAR)),
            .virt0 = (int64_t)(xorshift(&seed) % (100 * YEAR)),
        };
        /* up to +-11 days virtual: 11 days x TDF 1000 stays within int64 */
        int64_t virt = a.virt0 + (int64_t)(xorshift(&seed) % (2000000 * SEC)) -
                       1000000 * SEC;
        int64_t real = tdf_virt_to_real(&a, virt);

        CHECK(tdf_real_to_virt(&a, real) >= virt, "early: milli=%u", a.milli);
        CHECK(tdf_real_to_virt(&a, real - 1) < virt, "late: milli=%u", a.milli);
    }
}

/* Re-basing keeps virtual time continuous and monotonic across changes. */
static void test_rebase_monotonic(void)
{
    static const uint32_t sequence[] = { 10000, 2000, 10000, 1000, 2500,
                                         1000000, 1000, 3333 };
    struct tdf_anchor a;
    int64_t real = 7 * SEC, last = TDF_S64_MIN;
    unsigned int i;
    uint64_t seed = 99;

    tdf_anchor_init(&a);
    for ( i = 0; i < sizeof(sequence) / sizeof(sequence[0]); i++ )
    {
        int64_t before = tdf_real_to_virt(&a, real);
        int64_t step;

        tdf_rebase(&a, real, sequence[i]);
        CHECK(tdf_real_to_virt(&a, real) == before, "continuous at change %u", i);
        CHECK(before >= last, "monotonic at change %u", i);
        for ( step = 0; step < 1000; step++ )
        {
            int64_t v;

            real += (int64_t)(xorshift(&seed) % (3 * SEC));
            v = tdf_real_to_virt(&a, real);
            CHECK(v >= last, "backwards after change %u", i);
            last = v;
        }
    }
    /* Back at 1000 the offset is kept: not an identity, but rate 1. */
    tdf_rebase(&a, real, 1000);
    CHECK(!tdf_is_identity(&a) || a.real0 == a.virt0, "offset kept");
    CHECK(tdf_real_to_virt(&a, real + SEC) - tdf_real_to_virt(&a, real) == SEC,
          "rate 1 after going back");
}

static void test_tsc_scale(void)
{
    static const uint32_t factors[] = { 1000, 1500, 2000, 2500, 10000, 123456,
                                        1000000 };
    unsigned int i;

    for ( i = 0; i < sizeof(factors) / sizeof(factors[0]); i++ )
    {
        /* A 2.5 GHz TSC: 0.4 ns per tick == mul 0xCCCCCCCC, shift -1. */
        uint32_t mul = 0xccccccccU;
        int8_t shift = -1;
        uint64_t ticks = 2500000000ULL * 60; /* one real minute */
        uint64_t ns, expect;
        double err;

        tdf_scale_tsc_mul(&mul, &shift, factors[i]);
        CHECK(factors[i] == 1000 || (mul >= 0x80000000U), "normalised");
        ns = (uint64_t)(((unsigned __int128)(shift >= 0 ? ticks << shift
                                                        : ticks >> -shift) *
                         mul) >> 32);
        expect = 60ULL * SEC * 1000 / factors[i];
        err = ((double)ns - (double)expect) / (double)expect;
        CHECK(err < 1e-6 && err > -1e-6, "factor %u: %" PRIu64 " vs %" PRIu64,
              factors[i], ns, expect);
    }
}

static void test_limits(void)
{
    CHECK(!tdf_milli_valid(999), "below");
    CHECK(tdf_milli_valid(1000) && tdf_milli_valid(1000000), "edges");
    CHECK(!tdf_milli_valid(1000001) && !tdf_milli_valid(0), "above");
    /* 3 GHz overflows Linux's tsc_khz only near TDF 1431: TDF 1000 is fine. */
    CHECK(tdf_milli_limit(3000000) == TDF_MILLI_MAX, "3 GHz limit %u",
          tdf_milli_limit(3000000));
    CHECK(tdf_milli_limit(5000000) == 858993, "5 GHz limit %u",
          tdf_milli_limit(5000000));
}

/* Freezing stops virtual time at once; thawing loses none of it. */
static void test_freeze_thaw(void)
{
    struct tdf_anchor a = { .milli = 10000, .real0 = 5 * SEC, .virt0 = 2 * SEC };
    int64_t frozen_at = 25 * SEC, v;

    v = tdf_real_to_virt(&a, frozen_at);
    tdf_freeze(&a, frozen_at);
    CHECK(!tdf_is_identity(&a), "frozen is not an identity");
    CHECK(tdf_real_to_virt(&a, frozen_at) == v, "continuous at the freeze");
    CHECK(tdf_real_to_virt(&a, frozen_at + 100 * YEAR) == v, "stands still");
    CHECK(tdf_real_to_virt(&a, frozen_at - 10 * SEC) == v - SEC, "the past is kept");
    /* Deadlines after the freeze are never reached; earlier ones are. */
    CHECK(tdf_virt_to_real(&a, v + 1) == TDF_S64_MAX, "no deadline while frozen");
    CHECK(tdf_virt_to_real(&a, v) == frozen_at, "deadline at the freeze");
    CHECK(tdf_virt_to_real(&a, v - SEC) == frozen_at - 10 * SEC, "past deadline");
    /* A factor change while frozen takes effect at the thaw. */
    tdf_rebase(&a, frozen_at + 3 * SEC, 2000);
    CHECK(a.frozen && tdf_real_to_virt(&a, frozen_at + 50 * SEC) == v, "still frozen");
    tdf_thaw(&a, 1000 * SEC);
    CHECK(!a.frozen, "thawed");
    CHECK(tdf_real_to_virt(&a, 1000 * SEC) == v, "no virtual time lost");
    CHECK(tdf_real_to_virt(&a, 1002 * SEC) == v + SEC, "new factor after thaw");
    CHECK(tdf_virt_to_real(&a, v + SEC) == 1002 * SEC, "deadline after thaw");
    tdf_thaw(&a, 2000 * SEC);
    CHECK(a.real0 == 1000 * SEC, "thawing a running anchor changes nothing");
}

/*
 * Runstate in virtual time: a vCPU that changes state at random instants
 * while the factor changes, and the domain is frozen and thawed, keeps
 * every total monotonic, and steal (runnable + offline) and the sum of all
 * states never exceed the virtual time elapsed.
 */
static void test_runstate_accounting(void)
{
    static const uint32_t sequence[] = { 1000, 10000, 2000, 1000000, 1000,
                                         3333, 10000 };
    struct tdf_anchor a;
    uint64_t totals[4] = { 0 }, before[4];
    uint64_t seed = 4242;
    int64_t real = 3 * SEC, entry, start;
    unsigned int state = 0, i, step, s;

    tdf_anchor_init(&a);
    start = entry = tdf_real_to_virt(&a, real);
    for ( i = 0; i < sizeof(sequence) / sizeof(sequence[0]); i++ )
    {
        if ( i == 3 )
            tdf_freeze(&a, real);
        if ( i == 5 )
            tdf_thaw(&a, real);
        tdf_rebase(&a, real, sequence[i]);
        for ( step = 0; step < 2000; step++ )
        {
            int64_t now;
            uint64_t sum = 0;

            real += (int64_t)(xorshift(&seed) % (SEC / 10));
            now = tdf_real_to_virt(&a, real);
            for ( s = 0; s < 4; s++ )
                before[s] = totals[s];
            tdf_account(&totals[state], &entry, now);
            state = (unsigned int)(xorshift(&seed) % 4);
            for ( s = 0; s < 4; s++ )
            {
                CHECK(totals[s] >= before[s], "state %u went down", s);
                sum += totals[s];
            }
            CHECK(totals[1] + totals[3] <= (uint64_t)(now - start),
                  "steal above elapsed virtual time");
            CHECK(sum == (uint64_t)(now - start), "sum %" PRIu64 " elapsed %"
                  PRId64, sum, now - start);
        }
    }
    /* Frozen: no state accumulates anything. */
    tdf_freeze(&a, real);
    for ( s = 0; s < 4; s++ )
        before[s] = totals[s];
    tdf_account(&totals[2], &entry, tdf_real_to_virt(&a, real + 100 * SEC));
    CHECK(totals[2] == before[2], "frozen time counted");
}

/*
 * Periodic timers in virtual time: after a change from TDF 10 to 2 the next
 * tick is a full period of virtual time after the last one, never less.
 */
static void test_periodic(void)
{
    struct tdf_anchor a = { .milli = 10000 };
    const uint64_t period = 10000000; /* 10 ms, the default PV ticker */
    int64_t last = 0, next, real = 0, prev_event = 0;
    int fire, events = 0;

    next = tdf_periodic_next(&last, period, tdf_real_to_virt(&a, real), &fire);
    CHECK(!fire && next == (int64_t)period, "first event one period away");
    while ( events < 1000 )
    {
        int64_t deadline = tdf_virt_to_real(&a, next);

        /* Change the factor between ticks, at an arbitrary instant. */
        if ( events % 7 == 3 )
        {
            real += (deadline - real) / 3;
            tdf_rebase(&a, real, a.milli == 10000 ? 2000 : 10000);
            deadline = tdf_virt_to_real(&a, next);
        }
        real = deadline;
        next = tdf_periodic_next(&last, period, tdf_real_to_virt(&a, real), &fire);
        CHECK(fire, "a timer at its real deadline is due");
        CHECK(last - prev_event >= (int64_t)period, "tick after %" PRId64
              " ns of virtual time", last - prev_event);
        CHECK(last - prev_event <= (int64_t)period + 1, "late tick");
        prev_event = last;
        events++;
    }
    /* A huge period saturates instead of wrapping. */
    last = TDF_S64_MAX - 5;
    next = tdf_periodic_next(&last, ~0ULL >> 2, TDF_S64_MAX - 5, &fire);
    CHECK(!fire && next == TDF_S64_MAX, "saturated next event");
}

/* Every watchdog-style "now + timeout" addition saturates. */
static void test_timeouts_saturate(void)
{
    static const uint32_t factors[] = { 1000, 10000, TDF_MILLI_MAX };
    unsigned int i;
    uint64_t t;

    for ( i = 0; i < 3; i++ )
    {
        struct tdf_anchor a = { .milli = factors[i], .real0 = 40 * YEAR,
                                .virt0 = 4 * YEAR };

        for ( t = 0; t <= 0xffffffffULL; t += 0x1000001ULL )
        {
            /* SCHEDOP_watchdog: a 32-bit number of seconds. */
            int64_t v = tdf_add_sat(tdf_real_to_virt(&a, 41 * YEAR),
                                    t * 1000000000ULL);
            int64_t r = tdf_virt_to_real(&a, v);

            CHECK(v >= 4 * YEAR && r >= 41 * YEAR, "timeout %" PRIu64, t);
        }
        CHECK(tdf_virt_to_real(&a, tdf_add_sat(TDF_S64_MAX - 1, ~0ULL)) ==
              TDF_S64_MAX,
              "largest deadline");
    }
}

static void test_dilate_khz(void)
{
    CHECK(tdf_dilate_khz(3000000, 10000) == 30000000U, "TDF 10");
    CHECK(tdf_dilate_khz(2500000, 2500) == 6250000U, "TDF 2.5");
    CHECK(tdf_dilate_khz(3000000, 1000) == 3000000U, "TDF 1");
    CHECK(tdf_dilate_khz(5000000, 1000000) == 0xffffffffU, "saturates");
    CHECK(tdf_dilate_khz(5000000, tdf_milli_limit(5000000)) <= 0xffffffffU &&
          tdf_dilate_khz(5000000, tdf_milli_limit(5000000)) > 4290000000U,
          "at the limit");
}

int main(void)
{
    test_muldiv();
    test_identity();
    test_integer_exactness();
    test_no_overflow();
    test_round_trip();
    test_rebase_monotonic();
    test_tsc_scale();
    test_limits();
    test_freeze_thaw();
    test_runstate_accounting();
    test_periodic();
    test_timeouts_saturate();
    test_dilate_khz();
    if ( failures )
    {
        printf("time_dilation arithmetic: %d check(s) failed\n", failures);
        return 1;
    }
    printf("time_dilation arithmetic: all checks passed\n");
    return 0;
}

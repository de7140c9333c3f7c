/*
 * User-space tests of the time dilation arithmetic in src/time_dilation.h,
 * the header the patch series adds to Xen as xen/include/xen/time_dilation.h.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "time_dilation.h"

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
    CHECK(tdf_muldiv(10, 3, 4, 0) == 7, "floor");
    CHECK(tdf_muldiv(10, 3, 4, 1) == 8, "ceil");
    CHECK(tdf_muldiv(~0ULL, ~0ULL, 1, 0) == ~0ULL, "saturates");
    CHECK(tdf_muldiv(~0ULL, 2, 2, 0) == ~0ULL, "exact max");
    CHECK(tdf_muldiv(1ULL << 63, 4, 2, 0) == ~0ULL, "quotient overflow");
    CHECK(tdf_muldiv(5, 5, 0, 0) == ~0ULL, "zero divisor");
    CHECK(tdf_muldiv(1ULL << 62, 1000, 1000, 0) == 1ULL << 62, "identity");
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
        ns = shift >= 0 ? tdf_muldiv(ticks << shift, mul, 1ULL << 32, 0)
                        : tdf_muldiv(ticks >> -shift, mul, 1ULL << 32, 0);
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
    if ( failures )
    {
        printf("time_dilation arithmetic: %d check(s) failed\n", failures);
        return 1;
    }
    printf("time_dilation arithmetic: all checks passed\n");
    return 0;
}

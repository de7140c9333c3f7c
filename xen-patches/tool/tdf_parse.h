/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Parsing and printing of time dilation factors for selena-tdf.
 * Kept free of Xen headers so it can be unit-tested anywhere.
 */
#ifndef SELENA_TDF_PARSE_H
#define SELENA_TDF_PARSE_H

#include <stdint.h>
#include <stdio.h>

#define TDF_PARSE_MIN_MILLI 1000U
#define TDF_PARSE_MAX_MILLI 1000000U

enum tdf_parse_result {
    TDF_PARSE_OK = 0,
    TDF_PARSE_SYNTAX,     /* not a decimal number */
    TDF_PARSE_PRECISION,  /* more than three decimal places */
    TDF_PARSE_RANGE,      /* outside 1..1000 */
};

/* Parse "10", "2.5", "1.125" into thousandths. */
static inline enum tdf_parse_result tdf_parse(const char *s, uint32_t *milli)
{
    uint64_t whole = 0, frac = 0;
    unsigned int frac_digits = 0;
    int digits = 0;

    for ( ; *s >= '0' && *s <= '9'; s++, digits++ )
    {
        whole = whole * 10 + (uint64_t)(*s - '0');
        if ( whole > 1000000 )
            return TDF_PARSE_RANGE;
    }
    if ( *s == '.' )
    {
        for ( s++; *s >= '0' && *s <= '9'; s++, digits++ )
        {
            if ( frac_digits == 3 )
            {
                if ( *s != '0' )
                    return TDF_PARSE_PRECISION;
                continue;
            }
            frac = frac * 10 + (uint64_t)(*s - '0');
            frac_digits++;
        }
    }
    if ( *s != '\0' || digits == 0 )
        return TDF_PARSE_SYNTAX;
    while ( frac_digits++ < 3 )
        frac *= 10;
    whole = whole * 1000 + frac;
    if ( whole < TDF_PARSE_MIN_MILLI || whole > TDF_PARSE_MAX_MILLI )
        return TDF_PARSE_RANGE;
    *milli = (uint32_t)whole;
    return TDF_PARSE_OK;
}

/* Print thousandths as the shortest decimal: 10000 -> "10", 2500 -> "2.5". */
static inline void tdf_format(uint32_t milli, char *buf, size_t len)
{
    unsigned int frac = milli % 1000;

    if ( frac == 0 )
        snprintf(buf, len, "%u", milli / 1000);
    else if ( frac % 100 == 0 )
        snprintf(buf, len, "%u.%u", milli / 1000, frac / 100);
    else if ( frac % 10 == 0 )
        snprintf(buf, len, "%u.%02u", milli / 1000, frac / 10);
    else
        snprintf(buf, len, "%u.%03u", milli / 1000, frac);
}

#endif /* SELENA_TDF_PARSE_H */

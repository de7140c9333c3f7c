/* Unit tests of selena-tdf's argument parsing (tool/tdf_parse.h). */
#include <string.h>

#include "tdf_parse.h"

static int failures;

static void expect(const char *in, enum tdf_parse_result want, uint32_t milli)
{
    uint32_t got = 0;
    enum tdf_parse_result r = tdf_parse(in, &got);

    if ( r != want || (r == TDF_PARSE_OK && got != milli) )
    {
        failures++;
        fprintf(stderr, "FAIL parse \"%s\": result %d milli %u\n", in, r, got);
    }
}

static void expect_format(uint32_t milli, const char *want)
{
    char buf[32];

    tdf_format(milli, buf, sizeof(buf));
    if ( strcmp(buf, want) )
    {
        failures++;
        fprintf(stderr, "FAIL format %u: \"%s\" != \"%s\"\n", milli, buf, want);
    }
}

int main(void)
{
    expect("10", TDF_PARSE_OK, 10000);
    expect("2.5", TDF_PARSE_OK, 2500);
    expect("1", TDF_PARSE_OK, 1000);
    expect("1000", TDF_PARSE_OK, 1000000);
    expect("1.125", TDF_PARSE_OK, 1125);
    expect("2.5000", TDF_PARSE_OK, 2500);
    expect(".5", TDF_PARSE_RANGE, 0);
    expect("0.999", TDF_PARSE_RANGE, 0);
    expect("1000.001", TDF_PARSE_RANGE, 0);
    expect("99999999999999999999", TDF_PARSE_RANGE, 0);
    expect("1.0005", TDF_PARSE_PRECISION, 0);
    expect("", TDF_PARSE_SYNTAX, 0);
    expect(".", TDF_PARSE_SYNTAX, 0);
    expect("-2", TDF_PARSE_SYNTAX, 0);
    expect("2x", TDF_PARSE_SYNTAX, 0);
    expect("1e3", TDF_PARSE_SYNTAX, 0);
    expect_format(10000, "10");
    expect_format(2500, "2.5");
    expect_format(1250, "1.25");
    expect_format(1125, "1.125");
    expect_format(1000000, "1000");
    if ( failures )
        return 1;
    printf("selena-tdf parsing: all checks passed\n");
    return 0;
}

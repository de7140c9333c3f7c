/* Unit tests of the command-spec and network-directive parsers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec.h"

static int failures;

#define CHECK(cond) do { \
    if ( !(cond) ) { \
        fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
        failures++; \
    } \
} while ( 0 )

static int parse(const char *text, struct spec *s, const char **reason,
                 char *detail)
{
    return spec_parse(text, strlen(text), s, reason, detail, 200);
}

static void test_argv_spec(void)
{
    struct spec s;
    const char *reason;
    char detail[200];

    CHECK(parse("selena-cmd 1\ntimeout 5000000000\ncwd /tmp\n"
                "env A=1%20two\narg echo\narg hello%20world\narg %25\n",
                &s, &reason, detail) == 0);
    CHECK(s.argc == 3);
    CHECK(strcmp(s.argv[0], "echo") == 0);
    CHECK(strcmp(s.argv[1], "hello world") == 0);
    CHECK(strcmp(s.argv[2], "%") == 0);
    CHECK(s.argv[3] == NULL);
    CHECK(s.timeout_ns == 5000000000ull);
    CHECK(strcmp(s.cwd, "/tmp") == 0);
    CHECK(s.envc == 1 && strcmp(s.env[0], "A=1 two") == 0);
    CHECK(s.shell == NULL);
    spec_free(&s);
}

static void test_shell_spec_without_trailing_newline(void)
{
    struct spec s;
    const char *reason;
    char detail[200];

    CHECK(parse("selena-cmd 1\nshell echo%20%24((1+2))%0Aexit%203", &s, &reason,
                detail) == 0);
    CHECK(s.shell && strcmp(s.shell, "echo $((1+2))\nexit 3") == 0);
    CHECK(s.argc == 0);
    spec_free(&s);
}

static void expect_rejected(const char *text, const char *want_reason,
                            const char *want_detail)
{
    struct spec s;
    const char *reason = NULL;
    char detail[200] = "";

    if ( parse(text, &s, &reason, detail) == 0 )
    {
        fprintf(stderr, "accepted but should not: %s\n", text);
        failures++;
        spec_free(&s);
        return;
    }
    CHECK(strcmp(reason, want_reason) == 0);
    if ( !strstr(detail, want_detail) )
    {
        fprintf(stderr, "detail '%s' lacks '%s' for: %s\n", detail, want_detail, text);
        failures++;
    }
}

static void test_rejections(void)
{
    static char big[SPEC_MAX_BYTES + 64];
    size_t i;

    expect_rejected("", "bad-spec", "empty");
    expect_rejected("selena-cmd 2\narg true", "version", "version 2");
    expect_rejected("selena-cmd x\narg true", "bad-spec", "malformed version");
    expect_rejected("hello 1\narg true", "bad-spec", "first line");
    expect_rejected("selena-cmd 1\n", "bad-spec", "either arg");
    expect_rejected("selena-cmd 1\narg a\nshell b", "bad-spec", "either arg");
    expect_rejected("selena-cmd 1\narg bad%2", "bad-spec", "bad escape");
    expect_rejected("selena-cmd 1\narg bad%00nul", "bad-spec", "bad escape");
    expect_rejected("selena-cmd 1\narg raw space", "bad-spec", "bad escape");
    expect_rejected("selena-cmd 1\nfrobnicate x\narg a", "bad-spec", "'frobnicate'");
    expect_rejected("selena-cmd 1\ncwd relative\narg a", "bad-spec", "'cwd'");
    expect_rejected("selena-cmd 1\ncwd /a\ncwd /b\narg a", "bad-spec", "'cwd'");
    expect_rejected("selena-cmd 1\nenv NOEQUALS\narg a", "bad-spec", "'env'");
    expect_rejected("selena-cmd 1\ntimeout 1\ntimeout 2\narg a", "bad-spec", "timeout");
    expect_rejected("selena-cmd 1\ntimeout 99999999999999999999999\narg a",
                    "bad-spec", "timeout");
    expect_rejected("selena-cmd 1\ntimeout 18446744073709551615\narg a",
                    "bad-spec", "too long timeout");
    expect_rejected("selena-cmd 1\ntimeout 100000000000000001\narg a",
                    "bad-spec", "too long timeout");
    {
        struct spec s;
        const char *reason;
        char detail[200];

        CHECK(parse("selena-cmd 1\ntimeout 100000000000000000\narg a\n", &s, &reason,
                    detail) == 0);
        CHECK(s.timeout_ns == 100000000000000000ull);
        spec_free(&s);
    }
    expect_rejected("selena-cmd 1\narg \narg x", "bad-spec", "empty program");
    expect_rejected("selena-cmd 1\nargonly", "bad-spec", "no argument");

    memcpy(big, "selena-cmd 1\nshell ", 19);
    for ( i = 19; i < sizeof(big) - 1; i++ )
        big[i] = 'x';
    big[sizeof(big) - 1] = '\0';
    expect_rejected(big, "bad-spec", "exceeds");
}

static void test_arg_limit(void)
{
    char text[SPEC_MAX_BYTES];
    size_t off = (size_t)snprintf(text, sizeof(text), "selena-cmd 1\n");
    unsigned int i;

    for ( i = 0; i <= SPEC_MAX_ARGS; i++ )
        off += (size_t)snprintf(text + off, sizeof(text) - off, "arg a\n");
    expect_rejected(text, "bad-spec", "over-limit");
}

static void test_escape_roundtrip(void)
{
    const char *raw = "a b%c\n\t\x7f\xc3\xa9z";
    char esc[128];
    char *back;

    escape(raw, esc, sizeof(esc));
    CHECK(strcmp(esc, "a%20b%25c%0A%09%7F%C3%A9z") == 0);
    back = unescape(esc, strlen(esc));
    CHECK(back && strcmp(back, raw) == 0);
    free(back);
    /* Truncation never splits an escape. */
    escape("%%%%", esc, 8);
    CHECK(strcmp(esc, "%25%25") == 0);
}

static void test_cmd_ids(void)
{
    CHECK(valid_cmd_id("c1"));
    CHECK(valid_cmd_id("A_b-9"));
    CHECK(valid_cmd_id("12345678901234567890123456789012"));
    CHECK(!valid_cmd_id("123456789012345678901234567890123"));
    CHECK(!valid_cmd_id(""));
    CHECK(!valid_cmd_id("a/b"));
    CHECK(!valid_cmd_id("a.b"));
}

static int net(const char *line, struct net_directive *d, char *detail)
{
    return net_parse_line(line, strlen(line), d, detail, 200);
}

static void test_net_directives(void)
{
    struct net_directive d;
    char detail[200];

    CHECK(net("addr 02:00:01:00:01:00 10.0.0.1/24", &d, detail) == 0);
    CHECK(d.kind == NET_ADDR && strcmp(d.mac, "02:00:01:00:01:00") == 0 &&
          strcmp(d.arg1, "10.0.0.1/24") == 0);
    CHECK(net("route default 10.0.0.254", &d, detail) == 0);
    CHECK(d.kind == NET_ROUTE && strcmp(d.arg1, "default") == 0 &&
          strcmp(d.arg2, "10.0.0.254") == 0);
    CHECK(net("route 10.1.0.0/16 10.0.0.254", &d, detail) == 0);
    CHECK(net("arp 10.0.0.2 02:00:01:00:02:00 02:00:01:00:01:00", &d, detail) == 0);
    CHECK(d.kind == NET_ARP && strcmp(d.arg1, "10.0.0.2") == 0 &&
          strcmp(d.arg2, "02:00:01:00:02:00") == 0 &&
          strcmp(d.mac, "02:00:01:00:01:00") == 0);
    CHECK(net("mtu 02:00:01:00:01:00 9000", &d, detail) == 0 && d.kind == NET_MTU);
    CHECK(net("txqueuelen 02:00:01:00:01:00 100", &d, detail) == 0 &&
          d.kind == NET_TXQUEUELEN);
    CHECK(net("addr fd00::1/64 02:00:01:00:01:00", &d, detail) != 0);
    CHECK(net("addr 02:00:01:00:01:00 10.0.0.1", &d, detail) != 0);
    CHECK(net("addr 02:00:01:00:01:00 10.0.0.1/33", &d, detail) != 0);
    CHECK(net("addr 02:00:01:00:01:00 300.0.0.1/24", &d, detail) != 0);
    CHECK(net("mtu 02:00:01:00:01:00 0", &d, detail) != 0);
    CHECK(net("route default", &d, detail) != 0);
    CHECK(net("arp 10.0.0.2 zz:00:01:00:02:00 02:00:01:00:01:00", &d, detail) != 0);
    CHECK(net("addr  02:00:01:00:01:00 10.0.0.1/24", &d, detail) != 0);
    CHECK(net("reboot now", &d, detail) != 0 && strstr(detail, "unknown"));
    CHECK(net("name 02:00:01:00:01:00 eth1", &d, detail) == 0 && d.kind == NET_NAME &&
          strcmp(d.arg1, "eth1") == 0 && strcmp(d.mac, "02:00:01:00:01:00") == 0);
    CHECK(net("name 02:00:01:00:01:00 eth1/x", &d, detail) != 0);
    CHECK(net("name 02:00:01:00:01:00 averyverylongname", &d, detail) != 0);
    CHECK(net("route default fd00::fe", &d, detail) == 0 && d.kind == NET_ROUTE);
    CHECK(net("arp fd00::2 02:00:01:00:02:00 02:00:01:00:01:00", &d, detail) == 0);
    CHECK(net("addr 02:00:01:00:01:00 fd00::1/64", &d, detail) == 0);
}

int main(void)
{
    test_argv_spec();
    test_shell_spec_without_trailing_newline();
    test_rejections();
    test_arg_limit();
    test_escape_roundtrip();
    test_cmd_ids();
    test_net_directives();
    if ( failures )
    {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_spec: all checks passed\n");
    return 0;
}

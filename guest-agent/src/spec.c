/* Parsing of command specs and network directives (PROTOCOL.md, "Values"). */
#include "spec.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *detail, size_t detail_len, const char *fmt, ...)
{
    va_list ap;

    if ( detail && detail_len )
    {
        va_start(ap, fmt);
        vsnprintf(detail, detail_len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int hexval(char c)
{
    if ( c >= '0' && c <= '9' )
        return c - '0';
    if ( c >= 'A' && c <= 'F' )
        return c - 'A' + 10;
    if ( c >= 'a' && c <= 'f' )
        return c - 'a' + 10;
    return -1;
}

char *unescape(const char *src, size_t len)
{
    char *out = malloc(len + 1);
    size_t i, o = 0;

    if ( !out )
        return NULL;
    for ( i = 0; i < len; i++ )
    {
        unsigned char c = src[i];

        if ( c == '%' )
        {
            int hi, lo;

            if ( i + 2 >= len )
                goto bad;
            hi = hexval(src[i + 1]);
            lo = hexval(src[i + 2]);
            if ( hi < 0 || lo < 0 || (hi == 0 && lo == 0) )
                goto bad;
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        }
        else if ( c < 0x20 || c == ' ' || c == 0x7f )
            goto bad; /* must have been escaped */
        else
            out[o++] = (char)c;
    }
    out[o] = '\0';
    return out;

 bad:
    free(out);
    return NULL;
}

char *escape(const char *src, char *dst, size_t dst_len)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;

    if ( !dst_len )
        return dst;
    for ( ; *src; src++ )
    {
        unsigned char c = *src;

        if ( c == '%' || c <= ' ' || c >= 0x7f )
        {
            if ( o + 3 >= dst_len )
                break;
            dst[o++] = '%';
            dst[o++] = hex[c >> 4];
            dst[o++] = hex[c & 15];
        }
        else
        {
            if ( o + 1 >= dst_len )
                break;
            dst[o++] = (char)c;
        }
    }
    dst[o] = '\0';
    return dst;
}

int valid_cmd_id(const char *id)
{
    size_t n = 0;

    for ( ; id[n]; n++ )
    {
        char c = id[n];

        if ( !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               (c >= '0' && c <= '9') || c == '_' || c == '-') )
            return 0;
        if ( n >= CMD_ID_MAX )
            return 0;
    }
    return n > 0;
}

void spec_free(struct spec *s)
{
    unsigned int i;

    for ( i = 0; i < s->argc; i++ )
        free(s->argv[i]);
    for ( i = 0; i < s->envc; i++ )
        free(s->env[i]);
    free(s->cwd);
    free(s->shell);
    memset(s, 0, sizeof(*s));
}

static int parse_u64(const char *p, size_t len, uint64_t *out)
{
    uint64_t v = 0;
    size_t i;

    if ( len == 0 || len > 20 )
        return -1;
    for ( i = 0; i < len; i++ )
    {
        unsigned int d;

        if ( p[i] < '0' || p[i] > '9' )
            return -1;
        d = (unsigned int)(p[i] - '0');
        if ( v > (UINT64_MAX - d) / 10 )
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static int keyword_is(const char *line, size_t kwlen, const char *kw)
{
    return strlen(kw) == kwlen && memcmp(line, kw, kwlen) == 0;
}

int spec_parse(const char *buf, size_t len, struct spec *out,
               const char **reason, char *detail, size_t detail_len)
{
    size_t pos = 0;
    unsigned int lineno = 0;
    int have_timeout = 0;

    memset(out, 0, sizeof(*out));
    *reason = "bad-spec";
    if ( len > SPEC_MAX_BYTES )
        return fail(detail, detail_len, "spec of %zu bytes exceeds %d", len,
                    SPEC_MAX_BYTES);

    while ( pos < len )
    {
        const char *line = buf + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t linelen = nl ? (size_t)(nl - line) : len - pos;
        const char *sp = memchr(line, ' ', linelen);
        size_t kwlen, arglen;
        const char *arg;
        char *val;

        pos += linelen + (nl ? 1 : 0);
        lineno++;
        if ( !sp )
        {
            fail(detail, detail_len, "line %u: no argument", lineno);
            goto err;
        }
        kwlen = (size_t)(sp - line);
        arg = sp + 1;
        arglen = linelen - kwlen - 1;

        if ( lineno == 1 )
        {
            uint64_t version;

            if ( !keyword_is(line, kwlen, "selena-cmd") )
            {
                fail(detail, detail_len, "first line is not 'selena-cmd <version>'");
                goto err;
            }
            if ( parse_u64(arg, arglen, &version) )
            {
                fail(detail, detail_len, "malformed version");
                goto err;
            }
            if ( version != PROTOCOL_VERSION )
            {
                *reason = "version";
                fail(detail, detail_len, "version %llu, agent speaks %d",
                     (unsigned long long)version, PROTOCOL_VERSION);
                goto err;
            }
            continue;
        }

        if ( keyword_is(line, kwlen, "timeout") )
        {
            /* Bounded so that start + timeout can never wrap the deadline. */
            if ( have_timeout || parse_u64(arg, arglen, &out->timeout_ns) ||
                 out->timeout_ns > SPEC_TIMEOUT_NS_MAX )
            {
                fail(detail, detail_len, "line %u: bad, repeated or too long timeout",
                     lineno);
                goto err;
            }
            have_timeout = 1;
            continue;
        }

        val = unescape(arg, arglen);
        if ( !val )
        {
            fail(detail, detail_len, "line %u: bad escape", lineno);
            goto err;
        }
        if ( keyword_is(line, kwlen, "arg") && out->argc < SPEC_MAX_ARGS )
            out->argv[out->argc++] = val;
        else if ( keyword_is(line, kwlen, "env") && out->envc < SPEC_MAX_ENV &&
                  strchr(val, '=') && val[0] != '=' )
            out->env[out->envc++] = val;
        else if ( keyword_is(line, kwlen, "cwd") && !out->cwd && val[0] == '/' )
            out->cwd = val;
        else if ( keyword_is(line, kwlen, "shell") && !out->shell && val[0] )
            out->shell = val;
        else
        {
            free(val);
            fail(detail, detail_len,
                 "line %u: unknown, repeated, over-limit or invalid '%.*s'",
                 lineno, (int)(kwlen > 16 ? 16 : kwlen), line);
            goto err;
        }
    }

    if ( lineno == 0 )
    {
        fail(detail, detail_len, "empty spec");
        goto err;
    }
    if ( (out->argc == 0) == (out->shell == NULL) )
    {
        fail(detail, detail_len, "need either arg lines or one shell line");
        goto err;
    }
    if ( out->argc && out->argv[0][0] == '\0' )
    {
        fail(detail, detail_len, "empty program name");
        goto err;
    }
    *reason = NULL;
    return 0;

 err:
    spec_free(out);
    return -1;
}

static int valid_mac(const char *p, size_t len)
{
    size_t i;

    if ( len != 17 )
        return 0;
    for ( i = 0; i < 17; i++ )
    {
        if ( i % 3 == 2 ? p[i] != ':' : hexval(p[i]) < 0 )
            return 0;
    }
    return 1;
}

/* An interface name the kernel accepts: 1 to 15 of [A-Za-z0-9_.-]. */
static int valid_ifname(const char *p, size_t len)
{
    size_t i;

    if ( len == 0 || len > 15 )
        return 0;
    for ( i = 0; i < len; i++ )
    {
        char c = p[i];

        if ( !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-') )
            return 0;
    }
    return 1;
}

static int valid_ip(const char *p, size_t len, int with_prefix)
{
    char buf[64];
    unsigned char addr[16];
    const char *slash;
    size_t iplen = len;

    if ( len == 0 || len >= sizeof(buf) )
        return 0;
    memcpy(buf, p, len);
    buf[len] = '\0';
    slash = strchr(buf, '/');
    if ( with_prefix )
    {
        uint64_t prefix;
        int v6;

        if ( !slash )
            return 0;
        iplen = (size_t)(slash - buf);
        buf[iplen] = '\0';
        v6 = strchr(buf, ':') != NULL;
        if ( parse_u64(slash + 1, strlen(slash + 1), &prefix) ||
             prefix > (v6 ? 128u : 32u) )
            return 0;
        return inet_pton(v6 ? AF_INET6 : AF_INET, buf, addr) == 1;
    }
    if ( slash )
        return 0;
    return inet_pton(strchr(buf, ':') ? AF_INET6 : AF_INET, buf, addr) == 1;
}

/* Split line into at most 4 space-separated words. */
static unsigned int split(const char *line, size_t len, const char *w[4],
                          size_t wl[4])
{
    unsigned int n = 0;
    size_t i = 0;

    while ( i < len )
    {
        size_t start = i;

        while ( i < len && line[i] != ' ' )
            i++;
        if ( n == 4 || i == start )
            return 5; /* too many words or a double space */
        w[n] = line + start;
        wl[n++] = i - start;
        if ( i < len )
            i++;
    }
    return n;
}

static void copy_word(char *dst, size_t dst_len, const char *src, size_t len)
{
    if ( len >= dst_len )
        len = dst_len - 1;
    memcpy(dst, src, len);
    dst[len] = '\0';
}

int net_parse_line(const char *line, size_t len, struct net_directive *out,
                   char *detail, size_t detail_len)
{
    const char *w[4];
    size_t wl[4];
    unsigned int n = split(line, len, w, wl);
    uint64_t num;

    memset(out, 0, sizeof(*out));
    if ( n < 1 || n > 4 )
        return fail(detail, detail_len, "malformed directive");
    if ( keyword_is(w[0], wl[0], "name") && n == 3 )
    {
        if ( !valid_mac(w[1], wl[1]) || !valid_ifname(w[2], wl[2]) )
            return fail(detail, detail_len, "name wants <mac> <interface name>");
        out->kind = NET_NAME;
    }
    else if ( keyword_is(w[0], wl[0], "addr") && n == 3 )
    {
        if ( !valid_mac(w[1], wl[1]) || !valid_ip(w[2], wl[2], 1) )
            return fail(detail, detail_len, "addr wants <mac> <ip>/<prefix>");
        out->kind = NET_ADDR;
    }
    else if ( (keyword_is(w[0], wl[0], "mtu") ||
               keyword_is(w[0], wl[0], "txqueuelen")) && n == 3 )
    {
        if ( !valid_mac(w[1], wl[1]) || parse_u64(w[2], wl[2], &num) ||
             num == 0 || num > 1000000 )
            return fail(detail, detail_len, "%.*s wants <mac> <number>",
                        (int)wl[0], w[0]);
        out->kind = w[0][0] == 'm' ? NET_MTU : NET_TXQUEUELEN;
    }
    else if ( keyword_is(w[0], wl[0], "route") && n == 3 )
    {
        if ( !(keyword_is(w[1], wl[1], "default") || valid_ip(w[1], wl[1], 1)) ||
             !valid_ip(w[2], wl[2], 0) )
            return fail(detail, detail_len, "route wants <dest>/<prefix>|default <gw>");
        out->kind = NET_ROUTE;
        copy_word(out->arg1, sizeof(out->arg1), w[1], wl[1]);
        copy_word(out->arg2, sizeof(out->arg2), w[2], wl[2]);
        return 0;
    }
    else if ( keyword_is(w[0], wl[0], "arp") && n == 4 )
    {
        if ( !valid_ip(w[1], wl[1], 0) || !valid_mac(w[2], wl[2]) ||
             !valid_mac(w[3], wl[3]) )
            return fail(detail, detail_len, "arp wants <ip> <mac> <via mac>");
        out->kind = NET_ARP;
        copy_word(out->arg1, sizeof(out->arg1), w[1], wl[1]);
        copy_word(out->arg2, sizeof(out->arg2), w[2], wl[2]);
        copy_word(out->mac, sizeof(out->mac), w[3], wl[3]);
        return 0;
    }
    else
        return fail(detail, detail_len, "unknown directive");
    copy_word(out->mac, sizeof(out->mac), w[1], wl[1]);
    copy_word(out->arg1, sizeof(out->arg1), w[2], wl[2]);
    return 0;
}

/* Parsing of the control-channel values defined in PROTOCOL.md. */
#ifndef SELENA_SPEC_H
#define SELENA_SPEC_H

#include <stddef.h>
#include <stdint.h>

#define PROTOCOL_VERSION 1
#define SPEC_MAX_BYTES 4096
#define SPEC_MAX_ARGS 128
#define SPEC_MAX_ENV 64
/* 10^17 ns: about three years of guest time, far from 2^64 when added. */
#define SPEC_TIMEOUT_NS_MAX 100000000000000000ull
#define CMD_ID_MAX 32

struct spec {
    uint64_t timeout_ns;            /* 0: none */
    char *cwd;                      /* NULL: "/" */
    char *shell;                    /* NULL unless a shell command */
    char *argv[SPEC_MAX_ARGS + 1];  /* NULL-terminated */
    unsigned int argc;
    char *env[SPEC_MAX_ENV + 1];
    unsigned int envc;
};

/*
 * Parse a command spec of len bytes (not NUL-terminated). On success returns
 * 0 and fills *out, whose strings must be released with spec_free(). On error
 * returns -1, leaves nothing allocated, and points *reason at a static word
 * ("bad-spec" or "version") and writes a human detail into detail.
 */
int spec_parse(const char *buf, size_t len, struct spec *out,
               const char **reason, char *detail, size_t detail_len);
void spec_free(struct spec *s);

/*
 * Percent-unescape src[0..len) into a new NUL-terminated string. Returns NULL
 * on a malformed escape, an escaped NUL, or allocation failure.
 */
char *unescape(const char *src, size_t len);

/* Percent-escape a NUL-terminated string into dst (at most dst_len bytes
 * including the NUL); truncates at a whole escape. Returns dst. */
char *escape(const char *src, char *dst, size_t dst_len);

/* 1 if id is a valid command id (1..32 of [A-Za-z0-9_-]). */
int valid_cmd_id(const char *id);

/* One boot-time network directive. */
enum net_kind { NET_NAME, NET_ADDR, NET_MTU, NET_TXQUEUELEN, NET_ROUTE, NET_ARP };

struct net_directive {
    enum net_kind kind;
    char mac[18];       /* interface, by MAC (name/addr/mtu/txqueuelen/arp) */
    char arg1[64];      /* name: new name; addr: ip/prefix; mtu/txqlen: number;
                           route: dest; arp: ip */
    char arg2[64];      /* route: gateway; arp: neighbour's MAC */
};

/* Parse one directive line (no newline). Returns 0 or -1 with detail set. */
int net_parse_line(const char *line, size_t len, struct net_directive *out,
                   char *detail, size_t detail_len);

#endif /* SELENA_SPEC_H */

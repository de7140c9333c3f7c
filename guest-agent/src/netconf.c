/*
 * Boot-time network configuration (PROTOCOL.md, "Network directives"): each
 * directive is applied to the interface with its MAC, waiting for the
 * interface to appear, through ip(8) or net.c's ioctl and rtnetlink calls.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "net.h"
#include "netconf.h"
#include "spec.h"

#define NET_WAIT_NS 10000000000ull

static uint64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int ifname_of(const char *mac, char *name, size_t len)
{
    DIR *d = opendir("/sys/class/net");
    struct dirent *e;
    int found = 0;

    if ( !d )
        return 0;
    while ( !found && (e = readdir(d)) )
    {
        char path[300], addr[32];
        FILE *f;

        if ( e->d_name[0] == '.' )
            continue;
        snprintf(path, sizeof(path), "/sys/class/net/%s/address", e->d_name);
        f = fopen(path, "r");
        if ( !f )
            continue;
        if ( fgets(addr, sizeof(addr), f) && strncasecmp(addr, mac, 17) == 0 &&
             strlen(e->d_name) < len )
        {
            memcpy(name, e->d_name, strlen(e->d_name) + 1);
            found = 1;
        }
        fclose(f);
    }
    closedir(d);
    return found;
}

static int run_argv(char *const argv[])
{
    sigset_t sigchld;
    int status;
    pid_t pid;

    /* The agent blocks SIGCHLD (it reads it from a signalfd); ip must not. */
    sigemptyset(&sigchld);
    sigaddset(&sigchld, SIGCHLD);
    pid = fork();
    if ( pid < 0 )
        return -1;
    if ( pid == 0 )
    {
        sigprocmask(SIG_UNBLOCK, &sigchld, NULL);
        execvp(argv[0], argv);
        _exit(127);
    }
    if ( waitpid(pid, &status, 0) < 0 )
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static int apply_directive(const struct net_directive *d, char *detail, size_t dlen)
{
    char ifname[64] = "";
    uint64_t deadline = mono_ns() + NET_WAIT_NS;
    int rc = 0;

    if ( d->kind != NET_ROUTE )
    {
        struct timespec pause = { 0, 100000000 };

        while ( !ifname_of(d->mac, ifname, sizeof(ifname)) )
        {
            if ( mono_ns() > deadline )
            {
                snprintf(detail, dlen, "no interface with MAC %s", d->mac);
                return -1;
            }
            nanosleep(&pause, NULL);
        }
    }
    switch ( d->kind )
    {
    case NET_NAME:
        if ( net_rename(ifname, d->arg1) )
        {
            snprintf(detail, dlen, "cannot rename %s to %s: %s", ifname, d->arg1,
                     strerror(errno));
            return -1;
        }
        break;
    case NET_ADDR:
    {
        char *const add[] = { "ip", "addr", "add", (char *)d->arg1, "dev", ifname, NULL };
        char *const up[] = { "ip", "link", "set", ifname, "up", NULL };

        if ( strchr(d->arg1, ':') )
            net_no_dad(ifname);
        rc = run_argv(add) || run_argv(up);
        break;
    }
    case NET_MTU:
    {
        char *const a[] = { "ip", "link", "set", ifname, "mtu", (char *)d->arg1, NULL };

        rc = run_argv(a);
        break;
    }
    case NET_TXQUEUELEN:
    {
        char *const a[] = { "ip", "link", "set", ifname, "qlen", (char *)d->arg1, NULL };

        rc = run_argv(a);
        break;
    }
    case NET_ROUTE:
    {
        char *const a[] = { "ip", strchr(d->arg2, ':') ? "-6" : "-4", "route", "replace",
                            (char *)d->arg1, "via", (char *)d->arg2, NULL };

        rc = run_argv(a);
        break;
    }
    case NET_ARP:
        if ( net_set_neighbour(ifname, d->arg1, d->arg2) )
        {
            snprintf(detail, dlen, "cannot set neighbour %s on %s: %s", d->arg1, ifname,
                     strerror(errno));
            return -1;
        }
        break;
    }
    if ( rc )
        snprintf(detail, dlen, "ip failed (status %d)", rc);
    return rc ? -1 : 0;
}

int netconf_apply(const char *text, char *result, size_t result_len)
{
    const char *line, *next;
    char detail[200], esc[600];
    unsigned int index = 0;

    for ( line = text; line && *line; line = next )
    {
        struct net_directive d;
        size_t n;

        next = strchr(line, '\n');
        n = next ? (size_t)(next - line) : strlen(line);
        if ( next )
            next++;
        if ( n == 0 )
            continue;
        if ( net_parse_line(line, n, &d, detail, sizeof(detail)) ||
             apply_directive(&d, detail, sizeof(detail)) )
        {
            snprintf(result, result_len, "failed %u %s", index,
                     escape(detail, esc, sizeof(esc)));
            return -1;
        }
        index++;
    }
    snprintf(result, result_len, "ok");
    return 0;
}

/*
 * The agent's Xenstore tool (`selena-agent xs ...`): a client for tests
 * inside guests and the control channel's floor for bench-control.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xs.h"
#include "xstool.h"

/*
 * `selena-agent xs echo PING PONG COUNT`: the control channel's floor for
 * `selena lab bench-control`. Writes "ready" to PONG, then copies each new
 * value of PING to PONG, COUNT times: a Xenstore round trip with a watch on
 * each side and no process started.
 */
static int xs_echo(struct xs_conn *xs, const char *ping, const char *pong,
                   long count)
{
    struct pollfd pfd = { .fd = xs->fd, .events = POLLIN };
    char *last = NULL;
    int rc = xs_watch(xs, ping, "selena-echo");

    if ( rc == 0 )
        rc = xs_write_str(xs, pong, "ready");
    while ( rc == 0 && count > 0 )
    {
        struct xs_event ev;
        char *val;
        size_t len;

        while ( !xs->ev_count && rc == 0 )
        {
            if ( poll(&pfd, 1, -1) < 0 && errno != EINTR )
                rc = -errno;
            else if ( pfd.revents & POLLIN )
                rc = xs_pump(xs);
        }
        while ( rc == 0 && xs_next_event(xs, &ev) )
        {
            free(ev.path);
            free(ev.token);
        }
        if ( rc || xs_read(xs, ping, &val, &len) )
            continue;               /* not written yet: the watch's first firing */
        if ( !last || strcmp(val, last) != 0 )
        {
            rc = xs_write_str(xs, pong, val);
            count--;
        }
        free(last);
        last = val;
    }
    free(last);
    return rc;
}

int xs_tool(struct xs_conn *xs, int argc, char **argv)
{
    char *val = NULL;
    size_t len = 0;
    int rc;

    if ( strcmp(argv[0], "echo") == 0 && argc == 4 )
        rc = xs_echo(xs, argv[1], argv[2], strtol(argv[3], NULL, 10));
    else if ( strcmp(argv[0], "read") == 0 )
        rc = xs_read(xs, argv[1], &val, &len);
    else if ( strcmp(argv[0], "ls") == 0 )
        rc = xs_directory(xs, argv[1], &val, &len);
    else if ( strcmp(argv[0], "write") == 0 && argc == 3 )
        rc = xs_write_str(xs, argv[1], argv[2]);
    else if ( strcmp(argv[0], "rm") == 0 )
        rc = xs_rm(xs, argv[1]);
    else
    {
        fprintf(stderr, "usage: selena-agent xs read|ls|rm PATH | write PATH VALUE | "
                "echo PING PONG COUNT\n");
        return 2;
    }
    if ( rc )
    {
        printf("%s\n", xs_errname(rc));
        return 1;
    }
    if ( val )
    {
        size_t i;

        for ( i = 0; i < len; i++ )
            putchar(val[i] ? val[i] : '\n');
        if ( len && val[len - 1] )
            putchar('\n');
        free(val);
    }
    return 0;
}


/* libFuzzer target: the agent's Xenstore framing (src/xs.c) must never
 * crash, leak or overrun on any byte stream the store could send back,
 * whether it arrives as replies to requests or as unsolicited watch events. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "xs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct xs_conn c;
    struct xs_event ev;
    int sv[2];
    unsigned int step;
    uint8_t plan;

    if ( size < 1 )
        return 0;
    /* The first byte picks the sequence of calls; the rest is the stream. */
    plan = data[0];
    if ( socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) )
        abort();
    if ( size > 1 && write(sv[1], data + 1, size - 1) != (ssize_t)(size - 1) )
        abort();
    shutdown(sv[1], SHUT_WR);
    memset(&c, 0, sizeof(c));
    c.fd = sv[0];
    c.next_req = 1;
    for ( step = 0; step < 64; step++ )
    {
        char *val = NULL;
        size_t len = 0;
        int rc;

        switch ( (plan >> ((step % 4) * 2)) & 3 )
        {
        case 0:
            rc = xs_pump(&c);
            break;
        case 1:
            rc = xs_read(&c, "/local/domain/1/selena/cmd/x", &val, &len);
            /* A reply is NUL-terminated past its length. */
            if ( rc == 0 && (!val || val[len] != '\0') )
                abort();
            break;
        case 2:
            rc = xs_directory(&c, "/local/domain/1/selena/cmd", &val, &len);
            if ( rc == 0 && len > XS_PAYLOAD_MAX )
                abort();
            break;
        default:
            rc = xs_write_str(&c, "/local/domain/1/selena/out/x/state", "running");
            break;
        }
        free(val);
        if ( c.ev_count > XS_EVENT_QUEUE || c.rlen > sizeof(c.rbuf) )
            abort();
        while ( xs_next_event(&c, &ev) )
        {
            if ( !ev.path || !ev.token )
                abort();
            free(ev.path);
            free(ev.token);
        }
        if ( rc < 0 )
            break;
    }
    xs_close(&c);
    close(sv[1]);
    return 0;
}

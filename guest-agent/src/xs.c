/*
 * Xenstore wire protocol: a 16-byte header (type, req_id, tx_id, len) and up
 * to 4096 bytes of payload, the same over the guest's /dev/xen/xenbus and
 * Dom0's xenstored socket. Watch events may arrive between a request and its
 * reply; they are queued for the caller's event loop.
 */
#include "xs.h"

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

enum {
    XS_DIRECTORY = 1, XS_READ = 2, XS_WATCH = 4, XS_WRITE = 11, XS_RM = 13,
    XS_WATCH_EVENT = 15, XS_ERROR = 16,
};

struct hdr {
    uint32_t type, req_id, tx_id, len;
};

static const struct { const char *name; int err; } xs_errors[] = {
    { "EINVAL", EINVAL }, { "EACCES", EACCES }, { "EEXIST", EEXIST },
    { "EISDIR", EISDIR }, { "ENOENT", ENOENT }, { "ENOMEM", ENOMEM },
    { "ENOSPC", ENOSPC }, { "EIO", EIO }, { "ENOTEMPTY", ENOTEMPTY },
    { "ENOSYS", ENOSYS }, { "EROFS", EROFS }, { "EBUSY", EBUSY },
    { "EAGAIN", EAGAIN }, { "EISCONN", EISCONN }, { "E2BIG", E2BIG },
    { "EPERM", EPERM }, { "EQUOTA", EDQUOT },
};

const char *xs_errname(int err)
{
    unsigned int i;

    if ( err < 0 )
        err = -err;
    for ( i = 0; i < sizeof(xs_errors) / sizeof(xs_errors[0]); i++ )
        if ( xs_errors[i].err == err )
            return xs_errors[i].name;
    return "EIO";
}

static int errno_of(const unsigned char *payload, uint32_t len)
{
    unsigned int i;

    for ( i = 0; i < sizeof(xs_errors) / sizeof(xs_errors[0]); i++ )
    {
        size_t n = strlen(xs_errors[i].name);

        if ( len >= n && memcmp(payload, xs_errors[i].name, n) == 0 &&
             (len == n || payload[n] == '\0') )
            return -xs_errors[i].err;
    }
    return -EIO;
}

int xs_open(struct xs_conn *c, const char *device)
{
    struct stat st;

    memset(c, 0, sizeof(*c));
    c->next_req = 1;
    if ( stat(device, &st) == 0 && S_ISSOCK(st.st_mode) )
    {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        if ( strlen(device) >= sizeof(sa.sun_path) )
            return -ENAMETOOLONG;
        strcpy(sa.sun_path, device);
        c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if ( c->fd < 0 )
            return -errno;
        if ( connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) )
        {
            int err = -errno;

            close(c->fd);
            return err;
        }
        return 0;
    }
    c->fd = open(device, O_RDWR | O_CLOEXEC);
    return c->fd < 0 ? -errno : 0;
}

void xs_close(struct xs_conn *c)
{
    struct xs_event ev;

    while ( xs_next_event(c, &ev) )
    {
        free(ev.path);
        free(ev.token);
    }
    if ( c->fd >= 0 )
        close(c->fd);
    c->fd = -1;
}

static int write_all(int fd, const void *buf, size_t len)
{
    const unsigned char *p = buf;

    while ( len )
    {
        ssize_t n = write(fd, p, len);

        if ( n < 0 && errno == EINTR )
            continue;
        if ( n <= 0 )
            return n < 0 ? -errno : -EIO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static void queue_event(struct xs_conn *c, const unsigned char *p, uint32_t len)
{
    const unsigned char *nul = memchr(p, '\0', len);
    struct xs_event *ev;
    size_t tlen;

    if ( !nul )
        return;
    if ( c->ev_count == XS_EVENT_QUEUE )
    {
        c->ev_dropped++;
        return;
    }
    tlen = len - (size_t)(nul + 1 - p);
    ev = &c->events[(c->ev_head + c->ev_count) % XS_EVENT_QUEUE];
    ev->path = strndup((const char *)p, (size_t)(nul - p));
    ev->token = strndup((const char *)nul + 1, tlen);
    if ( !ev->path || !ev->token )
    {
        free(ev->path);
        free(ev->token);
        c->ev_dropped++;
        return;
    }
    c->ev_count++;
}

/*
 * Take one complete message out of the buffer. Returns 1 and fills *h and
 * *payload (malloc'd, NUL-terminated) for a reply, 0 if no complete message,
 * or consumes watch events and loops.
 */
static int take_message(struct xs_conn *c, struct hdr *h, unsigned char **payload)
{
    for ( ;; )
    {
        size_t total;

        if ( c->rlen < sizeof(*h) )
            return 0;
        memcpy(h, c->rbuf, sizeof(*h));
        if ( h->len > XS_PAYLOAD_MAX )
            return -EPROTO;
        total = sizeof(*h) + h->len;
        if ( c->rlen < total )
            return 0;
        if ( h->type == XS_WATCH_EVENT )
            queue_event(c, c->rbuf + sizeof(*h), h->len);
        else
        {
            *payload = malloc(h->len + 1);
            if ( !*payload )
                return -ENOMEM;
            memcpy(*payload, c->rbuf + sizeof(*h), h->len);
            (*payload)[h->len] = '\0';
        }
        memmove(c->rbuf, c->rbuf + total, c->rlen - total);
        c->rlen -= total;
        if ( h->type != XS_WATCH_EVENT )
            return 1;
    }
}

static int fill(struct xs_conn *c)
{
    ssize_t n;

    do
        n = read(c->fd, c->rbuf + c->rlen, sizeof(c->rbuf) - c->rlen);
    while ( n < 0 && errno == EINTR );
    if ( n < 0 )
        return -errno;
    if ( n == 0 )
        return -ECONNRESET;
    c->rlen += (size_t)n;
    return 0;
}

/* Queue watch events already buffered behind a reply, so a poll() that sees
 * no new data does not leave them waiting. */
static void drain_events(struct xs_conn *c)
{
    struct hdr h;
    unsigned char *stray;

    while ( take_message(c, &h, &stray) == 1 )
        free(stray);
}

int xs_pump(struct xs_conn *c)
{
    struct hdr h;
    unsigned char *payload = NULL;
    int rc = fill(c);

    if ( rc )
        return rc;
    /* A reply with no request in flight cannot happen; drop it if it does. */
    while ( (rc = take_message(c, &h, &payload)) == 1 )
        free(payload);
    return rc < 0 ? rc : 0;
}

int xs_next_event(struct xs_conn *c, struct xs_event *ev)
{
    if ( !c->ev_count )
        return 0;
    *ev = c->events[c->ev_head];
    c->ev_head = (c->ev_head + 1) % XS_EVENT_QUEUE;
    c->ev_count--;
    return 1;
}

/* Send one request made of parts (each followed by a NUL if nul[i]). */
static int request(struct xs_conn *c, uint32_t type, const void *const *parts,
                   const size_t *lens, const int *nul, unsigned int nparts,
                   unsigned char **reply, uint32_t *reply_len)
{
    unsigned char msg[sizeof(struct hdr) + XS_PAYLOAD_MAX];
    struct hdr h = { .type = type, .req_id = c->next_req++ };
    unsigned char *payload = NULL;
    size_t off = sizeof(h);
    unsigned int i;
    int rc;

    for ( i = 0; i < nparts; i++ )
    {
        size_t need = lens[i] + (nul[i] ? 1 : 0);

        if ( off + need > sizeof(msg) )
            return -E2BIG;
        memcpy(msg + off, parts[i], lens[i]);
        off += lens[i];
        if ( nul[i] )
            msg[off++] = '\0';
    }
    h.len = (uint32_t)(off - sizeof(h));
    memcpy(msg, &h, sizeof(h));
    rc = write_all(c->fd, msg, off);
    if ( rc )
        return rc;

    /* One request in flight: the next non-event message is its reply. */
    while ( (rc = take_message(c, &h, &payload)) == 0 )
    {
        rc = fill(c);
        if ( rc )
            return rc;
    }
    if ( rc < 0 )
        return rc;
    drain_events(c);
    if ( h.type == XS_ERROR )
    {
        rc = errno_of(payload, h.len);
        free(payload);
        return rc;
    }
    if ( reply )
    {
        *reply = payload;
        *reply_len = h.len;
    }
    else
        free(payload);
    return 0;
}

int xs_read(struct xs_conn *c, const char *path, char **val, size_t *len)
{
    const void *parts[] = { path };
    size_t lens[] = { strlen(path) };
    int nul[] = { 1 };
    unsigned char *reply;
    uint32_t rlen;
    int rc = request(c, XS_READ, parts, lens, nul, 1, &reply, &rlen);

    if ( rc )
        return rc;
    *val = (char *)reply;
    if ( len )
        *len = rlen;
    return 0;
}

int xs_write(struct xs_conn *c, const char *path, const void *val, size_t len)
{
    const void *parts[] = { path, val };
    size_t lens[] = { strlen(path), len };
    int nul[] = { 1, 0 };

    return request(c, XS_WRITE, parts, lens, nul, 2, NULL, NULL);
}

int xs_write_str(struct xs_conn *c, const char *path, const char *val)
{
    return xs_write(c, path, val, strlen(val));
}

int xs_rm(struct xs_conn *c, const char *path)
{
    const void *parts[] = { path };
    size_t lens[] = { strlen(path) };
    int nul[] = { 1 };

    return request(c, XS_RM, parts, lens, nul, 1, NULL, NULL);
}

int xs_directory(struct xs_conn *c, const char *path, char **buf, size_t *len)
{
    const void *parts[] = { path };
    size_t lens[] = { strlen(path) };
    int nul[] = { 1 };
    unsigned char *reply;
    uint32_t rlen;
    int rc = request(c, XS_DIRECTORY, parts, lens, nul, 1, &reply, &rlen);

    if ( rc )
        return rc;
    *buf = (char *)reply;
    *len = rlen;
    return 0;
}

int xs_watch(struct xs_conn *c, const char *path, const char *token)
{
    const void *parts[] = { path, token };
    size_t lens[] = { strlen(path), strlen(token) };
    int nul[] = { 1, 1 };

    return request(c, XS_WATCH, parts, lens, nul, 2, NULL, NULL);
}

/* A minimal Xenstore wire-protocol client (one request in flight). */
#ifndef SELENA_XS_H
#define SELENA_XS_H

#include <stddef.h>
#include <stdint.h>

#define XS_PAYLOAD_MAX 4096
#define XS_EVENT_QUEUE 256

struct xs_event {
    char *path;
    char *token;
};

struct xs_conn {
    int fd;
    uint32_t next_req;
    unsigned char rbuf[16 + XS_PAYLOAD_MAX];
    size_t rlen;
    struct xs_event events[XS_EVENT_QUEUE];
    unsigned int ev_head, ev_count;
    unsigned int ev_dropped;    /* overflow: caller must rescan */
};

int xs_open(struct xs_conn *c, const char *device);
void xs_close(struct xs_conn *c);

/* All return 0 or a negative errno (from Xenstore's error reply or I/O). */
int xs_read(struct xs_conn *c, const char *path, char **val, size_t *len);
int xs_write(struct xs_conn *c, const char *path, const void *val, size_t len);
int xs_write_str(struct xs_conn *c, const char *path, const char *val);
int xs_rm(struct xs_conn *c, const char *path);
/* NUL-separated child names in *buf (len bytes). */
int xs_directory(struct xs_conn *c, const char *path, char **buf, size_t *len);
int xs_watch(struct xs_conn *c, const char *path, const char *token);

/* Read what is available on the fd (call when it polls readable) and queue
 * watch events. Returns 0 or a negative errno. */
int xs_pump(struct xs_conn *c);
/* Pop one queued event: 1 if one was returned (caller frees both strings). */
int xs_next_event(struct xs_conn *c, struct xs_event *ev);

const char *xs_errname(int err);

#endif /* SELENA_XS_H */

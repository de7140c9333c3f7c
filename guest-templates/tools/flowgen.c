/*
 * flowgen: TCP flow generator for flow-completion-time (FCT) experiments.
 * Runs inside tiny guests; times are CLOCK_MONOTONIC, i.e. guest (virtual)
 * time under time dilation.
 *
 *   flowgen server [--port P]
 *       Accepts TCP connections, reads each until EOF, then closes it. One
 *       poll loop serves any number of concurrent connections. Runs until
 *       killed. Prints "flowgen: listening on port N" on stderr (useful with
 *       --port 0, which picks a free port).
 *
 *   flowgen client --host IPv4 [--port P]
 *                  (--rate FLOWS_PER_S | --concurrency N) --size BYTES
 *                  --duration SECONDS [--seed N] [--max-flows N]
 *                  [--timeout SECONDS] [--dry-run]
 *       Exactly one of --rate and --concurrency picks how flows start:
 *       --rate (open loop): flows start with exponential inter-arrival times
 *           (mean 1/rate, seeded by --seed) for --duration seconds after the
 *           first start.
 *       --concurrency N (closed loop, 1..1024): N flows start at once and,
 *           each time a flow ends (ok, timeout or error), a new one starts
 *           immediately, as long as less than --duration seconds have passed
 *           since the first start; so N flows are always in flight. --seed
 *           has no effect.
 *           A flow that ends in an error (a refused or unreachable
 *           server) delays the next start: 1 ms after the first error in a
 *           row, doubled by each further error up to 1 s, none again once a
 *           flow succeeds; so a dead server costs a few flows a second, not
 *           a busy loop.
 *       Either way --max-flows caps the number of flows started, and after
 *       the duration no flow starts but those in flight run to their end.
 *       Flows run concurrently in one nonblocking poll loop. Each flow:
 *       connect, send BYTES, shut down its sending side, wait for the
 *       server's EOF. start_ns is taken just before the socket is created,
 *       end_ns when the EOF arrives; a flow times out --timeout seconds
 *       after its start. When every flow has ended (or timed out), prints
 *       CSV on stdout, one line per flow in start order:
 *           flow,start_ns,end_ns,fct_s,bytes,status
 *       status: ok, timeout, error:<ERRNO NAME>; bytes: bytes sent.
 *       --dry-run prints the schedule (flow,offset_ns) and sends nothing; it
 *       needs --rate (with --concurrency it is a usage error: there is no
 *       schedule, flows start when others end).
 *
 * Exit status: 0 all flows ok, 1 some flows failed (or server error),
 * 2 usage error.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_PORT     5001
#define DEFAULT_TIMEOUT  60.0
#define DEFAULT_SEED     1
#define MAX_CONCURRENCY  1024
#define IO_CHUNK         65536
#define NS_PER_S         ((int64_t)1000000000)
#define BACKOFF_MIN_NS   ((int64_t)1000000)
#define BACKOFF_MAX_NS   NS_PER_S

static char io_buf[IO_CHUNK];

/* ---------------------------------------------------------------- helpers */

static int64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static const char *errno_name(int err)
{
    switch ( err )
    {
    case EACCES: return "EACCES";
    case EADDRINUSE: return "EADDRINUSE";
    case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
    case EAGAIN: return "EAGAIN";
    case EBADF: return "EBADF";
    case ECONNABORTED: return "ECONNABORTED";
    case ECONNREFUSED: return "ECONNREFUSED";
    case ECONNRESET: return "ECONNRESET";
    case EHOSTDOWN: return "EHOSTDOWN";
    case EHOSTUNREACH: return "EHOSTUNREACH";
    case EINTR: return "EINTR";
    case EINVAL: return "EINVAL";
    case EMFILE: return "EMFILE";
    case ENETDOWN: return "ENETDOWN";
    case ENETUNREACH: return "ENETUNREACH";
    case ENFILE: return "ENFILE";
    case ENOBUFS: return "ENOBUFS";
    case ENOMEM: return "ENOMEM";
    case ENOTCONN: return "ENOTCONN";
    case EPERM: return "EPERM";
    case EPIPE: return "EPIPE";
    case EPROTO: return "EPROTO";
    case ETIMEDOUT: return "ETIMEDOUT";
    default: return NULL;
    }
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: flowgen server [--port P]\n"
            "       flowgen client --host IPv4 [--port P]\n"
            "                      (--rate FLOWS_PER_S | --concurrency N) "
            "--size BYTES\n"
            "                      --duration SECONDS [--seed N] "
            "[--max-flows N]\n"
            "                      [--timeout SECONDS] [--dry-run]\n"
            "--rate: exponential inter-arrivals (open loop); --concurrency "
            "N (1..%d):\n"
            "N flows always in flight, a new one starting as one ends "
            "(closed loop).\n"
            "--dry-run prints the --rate schedule and sends nothing.\n"
            "defaults: --port %d, --seed %d, --timeout %.0f, no flow limit\n",
            MAX_CONCURRENCY, DEFAULT_PORT, DEFAULT_SEED, DEFAULT_TIMEOUT);
}

static void __attribute__((noreturn, format(printf, 1, 2)))
usage_error(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    fprintf(stderr, "flowgen: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    usage(stderr);
    exit(2);
}

static int set_nonblocking(int fd)
{
    int flags = fcntl(fd, F_GETFL);

    if ( flags < 0 )
        return -1;
    return fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

/* Lets as many sockets be open as the hard limit allows. */
static void raise_fd_limit(void)
{
    struct rlimit rl;

    if ( getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max )
    {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* ------------------------------------------------------- option parsing */

static double parse_double(const char *opt, const char *val, double min,
                           int min_exclusive)
{
    char *end;
    double d;

    errno = 0;
    d = strtod(val, &end);
    if ( errno || end == val || *end || !isfinite(d) ||
         (min_exclusive ? d <= min : d < min) )
    {
        fprintf(stderr, "flowgen: bad value '%s' for %s: expected a number "
                "%s %g\n", val, opt, min_exclusive ? ">" : ">=", min);
        usage(stderr);
        exit(2);
    }
    return d;
}

static uint64_t parse_u64(const char *opt, const char *val, uint64_t min,
                          uint64_t max)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(val, &end, 10);
    if ( errno || end == val || *end || val[0] == '-' || v < min || v > max )
    {
        fprintf(stderr, "flowgen: bad value '%s' for %s: expected an integer "
                "in %" PRIu64 "..%" PRIu64 "\n", val, opt, min, max);
        usage(stderr);
        exit(2);
    }
    return v;
}

/* --------------------------------------------------------------- server */

static int run_server(int argc, char **argv)
{
    unsigned int port = DEFAULT_PORT;
    struct sockaddr_in addr;
    socklen_t addrlen = sizeof(addr);
    struct pollfd *pfds;
    size_t npfds = 1, cap = 64, i;
    int lfd, one = 1;

    for ( i = 2; i < (size_t)argc; i++ )
    {
        if ( !strcmp(argv[i], "--port") )
        {
            if ( ++i >= (size_t)argc )
                usage_error("%s needs a value", "--port");
            port = parse_u64("--port", argv[i], 0, 65535);
        }
        else
            usage_error("unknown option '%s' for server", argv[i]);
    }

    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    if ( lfd < 0 )
    {
        perror("flowgen: socket");
        return 1;
    }
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(port);
    if ( bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
         listen(lfd, SOMAXCONN) < 0 || set_nonblocking(lfd) < 0 ||
         getsockname(lfd, (struct sockaddr *)&addr, &addrlen) < 0 )
    {
        fprintf(stderr, "flowgen: cannot listen on port %u: %s\n", port,
                strerror(errno));
        return 1;
    }
    fprintf(stderr, "flowgen: listening on port %u\n", ntohs(addr.sin_port));
    fflush(stderr);

    pfds = malloc(cap * sizeof(*pfds));
    if ( !pfds )
    {
        perror("flowgen: malloc");
        return 1;
    }
    pfds[0].fd = lfd;
    pfds[0].events = POLLIN;

    for ( ;; )
    {
        if ( poll(pfds, npfds, -1) < 0 )
        {
            if ( errno == EINTR )
                continue;
            perror("flowgen: poll");
            return 1;
        }

        /* Drain readable connections; a closed one is swapped with the last. */
        for ( i = 1; i < npfds; )
        {
            ssize_t n = 1;

            if ( pfds[i].revents )
            {
                while ( (n = read(pfds[i].fd, io_buf, sizeof(io_buf))) > 0 )
                    continue;
                if ( n < 0 && (errno == EAGAIN || errno == EINTR) )
                    n = 1;
            }
            if ( n <= 0 )   /* EOF or error: the flow is over */
            {
                close(pfds[i].fd);
                pfds[i] = pfds[--npfds];
                continue;
            }
            i++;
        }

        if ( pfds[0].revents & POLLIN )
        {
            int cfd;

            while ( (cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0 )
            {
                if ( npfds == cap )
                {
                    struct pollfd *bigger = realloc(pfds, 2 * cap *
                                                    sizeof(*pfds));

                    if ( !bigger )
                    {
                        close(cfd);
                        continue;
                    }
                    pfds = bigger;
                    cap *= 2;
                }
                pfds[npfds].fd = cfd;
                pfds[npfds].events = POLLIN;
                pfds[npfds].revents = 0;
                npfds++;
            }
            if ( errno != EAGAIN && errno != EINTR && errno != ECONNABORTED )
            {
                /* e.g. EMFILE: report, back off briefly, keep serving */
                fprintf(stderr, "flowgen: accept: %s\n", strerror(errno));
                poll(NULL, 0, 10);
            }
        }
    }
}

/* --------------------------------------------------------------- client */

/* splitmix64: small, fast, and good enough for inter-arrival sampling. */
static uint64_t prng_state;

static uint64_t splitmix64(void)
{
    uint64_t z = (prng_state += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Exponential variate with the given mean, from a uniform in (0, 1]. */
static double exp_variate(double mean)
{
    double u = ((splitmix64() >> 11) + 1) * (1.0 / 9007199254740992.0);

    return -log(u) * mean;
}

enum flow_state { CONNECTING, SENDING, WAITING_EOF, DONE };

struct flow
{
    int64_t offset_ns;          /* scheduled start after the first start
                                   (--rate only) */
    int64_t start_ns, end_ns;
    uint64_t sent;
    int fd;
    enum flow_state state;
    int err;                    /* 0 ok, -1 timeout, else errno */
};

struct client_opts
{
    struct sockaddr_in addr;
    double rate, duration, timeout;
    uint64_t size, seed, max_flows;
    uint64_t concurrency;       /* 0: --rate (open loop) */
    int dry_run;
};

static void parse_client(int argc, char **argv, struct client_opts *o)
{
    const char *host = NULL;
    int have_rate = 0, have_concurrency = 0, have_size = 0;
    int have_duration = 0, i;

    memset(o, 0, sizeof(*o));
    o->addr.sin_family = AF_INET;
    o->addr.sin_port = htons(DEFAULT_PORT);
    o->seed = DEFAULT_SEED;
    o->timeout = DEFAULT_TIMEOUT;
    o->max_flows = UINT64_MAX;

    for ( i = 2; i < argc; i++ )
    {
        const char *opt = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;

        if ( !strcmp(opt, "--dry-run") )
        {
            o->dry_run = 1;
            continue;
        }
        if ( strcmp(opt, "--host") && strcmp(opt, "--port") &&
             strcmp(opt, "--rate") && strcmp(opt, "--concurrency") &&
             strcmp(opt, "--size") && strcmp(opt, "--duration") &&
             strcmp(opt, "--seed") && strcmp(opt, "--max-flows") &&
             strcmp(opt, "--timeout") )
            usage_error("unknown option '%s' for client", opt);
        if ( !val )
            usage_error("%s needs a value", opt);
        i++;
        if ( !strcmp(opt, "--host") )
            host = val;
        else if ( !strcmp(opt, "--port") )
            o->addr.sin_port = htons(parse_u64(opt, val, 1, 65535));
        else if ( !strcmp(opt, "--rate") )
        {
            o->rate = parse_double(opt, val, 0, 1);
            have_rate = 1;
        }
        else if ( !strcmp(opt, "--concurrency") )
        {
            o->concurrency = parse_u64(opt, val, 1, MAX_CONCURRENCY);
            have_concurrency = 1;
        }
        else if ( !strcmp(opt, "--size") )
        {
            o->size = parse_u64(opt, val, 0, UINT64_MAX);
            have_size = 1;
        }
        else if ( !strcmp(opt, "--duration") )
        {
            o->duration = parse_double(opt, val, 0, 1);
            have_duration = 1;
        }
        else if ( !strcmp(opt, "--seed") )
            o->seed = parse_u64(opt, val, 0, UINT64_MAX);
        else if ( !strcmp(opt, "--max-flows") )
            o->max_flows = parse_u64(opt, val, 1, UINT64_MAX);
        else
            o->timeout = parse_double(opt, val, 0, 1);
    }

    if ( have_rate && have_concurrency )
        usage_error("--rate and --concurrency are mutually exclusive");
    if ( !have_rate && !have_concurrency )
        usage_error("missing --rate or --concurrency (exactly one is needed)");
    if ( o->dry_run && have_concurrency )
        usage_error("--dry-run needs --rate: with --concurrency there is no "
                    "schedule (flows start when others end)");
    if ( !have_size )
        usage_error("missing %s", "--size");
    if ( !have_duration )
        usage_error("missing %s", "--duration");
    if ( !o->dry_run && !host )
        usage_error("missing %s", "--host");
    if ( host && inet_pton(AF_INET, host, &o->addr.sin_addr) != 1 )
        usage_error("bad value '%s' for --host: expected an IPv4 address",
                    host);
    if ( o->duration * NS_PER_S > 9e18 || o->timeout * NS_PER_S > 9e18 )
        usage_error("--duration or --timeout too large");
}

/*
 * Appends a flow that has not started to the *n flows in *flows, which has
 * room for *cap; NULL (after a message) when out of memory.
 */
static struct flow *add_flow(struct flow **flows, size_t *n, size_t *cap)
{
    struct flow *f;

    if ( *n == *cap )
    {
        size_t bigger_cap = *cap ? 2 * *cap : 1024;
        struct flow *bigger = realloc(*flows, bigger_cap * sizeof(**flows));

        if ( !bigger )
        {
            fprintf(stderr, "flowgen: out of memory for %zu flows\n",
                    bigger_cap);
            return NULL;
        }
        *flows = bigger;
        *cap = bigger_cap;
    }
    f = &(*flows)[(*n)++];
    memset(f, 0, sizeof(*f));
    f->fd = -1;
    return f;
}

/* The whole schedule is drawn up front, so it depends only on the options. */
static struct flow *make_schedule(const struct client_opts *o, size_t *nflows)
{
    struct flow *flows = NULL, *f;
    size_t n = 0, cap = 0;
    double t = 0;
    int64_t limit = (int64_t)(o->duration * NS_PER_S);

    prng_state = o->seed;
    while ( n < o->max_flows )
    {
        int64_t off = (int64_t)(t * NS_PER_S);

        if ( off >= limit )
            break;
        f = add_flow(&flows, &n, &cap);
        if ( !f )
            exit(1);
        f->offset_ns = off;
        t += exp_variate(1.0 / o->rate);
    }
    *nflows = n;
    return flows;
}

static void finish(struct flow *f, int err)
{
    f->end_ns = now_ns();
    f->err = err;
    f->state = DONE;
    if ( f->fd >= 0 )
        close(f->fd);
    f->fd = -1;
}

/* start_ns is the caller's clock reading, the one it decided to start on. */
static void start_flow(struct flow *f, const struct client_opts *o,
                       int64_t start_ns)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

    f->start_ns = start_ns;
    if ( fd < 0 )
    {
        finish(f, errno);
        return;
    }
    f->fd = fd;
    if ( connect(fd, (const struct sockaddr *)&o->addr, sizeof(o->addr)) == 0 )
        f->state = SENDING;
    else if ( errno == EINPROGRESS )
        f->state = CONNECTING;
    else
        finish(f, errno);
}

/* Sends what the socket takes; moves on to WAITING_EOF after the last byte. */
static void pump_send(struct flow *f, const struct client_opts *o)
{
    while ( f->sent < o->size )
    {
        size_t want = o->size - f->sent < IO_CHUNK ? o->size - f->sent
                                                     : IO_CHUNK;
        ssize_t n = send(f->fd, io_buf, want, MSG_NOSIGNAL);

        if ( n < 0 )
        {
            if ( errno != EAGAIN && errno != EINTR )
                finish(f, errno);
            return;
        }
        f->sent += n;
    }
    if ( shutdown(f->fd, SHUT_WR) < 0 )
    {
        finish(f, errno);
        return;
    }
    f->state = WAITING_EOF;
}

static void handle_event(struct flow *f, short revents,
                         const struct client_opts *o)
{
    int err = 0;
    socklen_t len = sizeof(err);
    ssize_t n;

    switch ( f->state )
    {
    case CONNECTING:
        if ( getsockopt(f->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 )
            err = errno;
        if ( err )
        {
            finish(f, err);
            return;
        }
        if ( !(revents & POLLOUT) )
            return;
        f->state = SENDING;
        /* fall through */
    case SENDING:
        pump_send(f, o);
        return;
    case WAITING_EOF:
        while ( (n = read(f->fd, io_buf, sizeof(io_buf))) > 0 )
            continue;
        if ( n == 0 )
            finish(f, 0);
        else if ( errno != EAGAIN && errno != EINTR )
            finish(f, errno);
        return;
    case DONE:
        return;
    }
}

/* The closed loop's delay after flows that ended in errors in a row. */
struct backoff {
    int64_t delay_ns;       /* 0: the last ended flow did not fail */
    int64_t not_before;     /* no flow starts before this time */
};

static void backoff_note(struct backoff *b, const struct flow *f, int64_t now)
{
    if ( f->err > 0 )
    {
        b->delay_ns = b->delay_ns ? b->delay_ns * 2 : BACKOFF_MIN_NS;
        if ( b->delay_ns > BACKOFF_MAX_NS )
            b->delay_ns = BACKOFF_MAX_NS;
        b->not_before = now + b->delay_ns;
    }
    else if ( f->err == 0 )
    {
        b->delay_ns = 0;
        b->not_before = 0;
    }
}

static void print_results(const struct flow *flows, size_t n)
{
    size_t i;

    printf("flow,start_ns,end_ns,fct_s,bytes,status\n");
    for ( i = 0; i < n; i++ )
    {
        const struct flow *f = &flows[i];
        int64_t fct = f->end_ns - f->start_ns;
        const char *name;

        printf("%zu,%" PRId64 ",%" PRId64 ",%" PRId64 ".%09" PRId64
               ",%" PRIu64 ",", i, f->start_ns, f->end_ns, fct / NS_PER_S,
               fct % NS_PER_S, f->sent);
        if ( f->err == 0 )
            printf("ok\n");
        else if ( f->err < 0 )
            printf("timeout\n");
        else if ( (name = errno_name(f->err)) )
            printf("error:%s\n", name);
        else
            printf("error:E%d\n", f->err);
    }
    fflush(stdout);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

static void print_summary(const struct flow *flows, size_t n,
                          const struct client_opts *o)
{
    size_t i, ok = 0, timeouts = 0, errors = 0;
    int64_t *fcts = malloc((n ? n : 1) * sizeof(*fcts));
    double span = n ? (flows[n - 1].start_ns - flows[0].start_ns) / 1e9 : 0;

    for ( i = 0; i < n; i++ )
    {
        if ( flows[i].err == 0 && fcts )
            fcts[ok] = flows[i].end_ns - flows[i].start_ns;
        ok += flows[i].err == 0;
        timeouts += flows[i].err < 0;
        errors += flows[i].err > 0;
    }
    fprintf(stderr, "flowgen: %zu flows of %" PRIu64 " bytes ", n, o->size);
    if ( o->concurrency )
        fprintf(stderr, "with concurrency %" PRIu64, o->concurrency);
    else
        fprintf(stderr, "at %g/s", o->rate);
    fprintf(stderr, " over %.3f s: %zu ok, %zu timeout, %zu error", span, ok,
            timeouts, errors);
    if ( ok && fcts )
    {
        qsort(fcts, ok, sizeof(*fcts), cmp_i64);
        fprintf(stderr, "; fct median %.6f s, max %.6f s",
                fcts[(ok - 1) / 2] / 1e9, fcts[ok - 1] / 1e9);
    }
    fprintf(stderr, "\n");
    free(fcts);
}

static int run_client(int argc, char **argv)
{
    struct client_opts o;
    struct flow *flows = NULL;
    struct pollfd *pfds;
    size_t *active;
    size_t nflows = 0, cap = 0, maxlive, next = 0, nactive = 0, i;
    int64_t t0 = 0, timeout_ns, duration_ns;
    struct backoff backoff = { 0, 0 };

    parse_client(argc, argv, &o);
    if ( !o.concurrency )
        flows = make_schedule(&o, &nflows);

    if ( o.dry_run )
    {
        printf("flow,offset_ns\n");
        for ( i = 0; i < nflows; i++ )
            printf("%zu,%" PRId64 "\n", i, flows[i].offset_ns);
        free(flows);
        return 0;
    }

    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();
    timeout_ns = (int64_t)(o.timeout * NS_PER_S);
    duration_ns = (int64_t)(o.duration * NS_PER_S);
    maxlive = o.concurrency ? o.concurrency : (nflows ? nflows : 1);
    pfds = malloc(maxlive * sizeof(*pfds));
    active = malloc(maxlive * sizeof(*active));
    if ( !pfds || !active )
    {
        fprintf(stderr, "flowgen: out of memory\n");
        return 1;
    }

    /*
     * active[] holds the started flows that have not ended, so each round
     * costs O(live flows), not O(all flows so far). With --rate, flows[] is
     * the whole schedule and next indexes the first flow not started; with
     * --concurrency, flows[] grows by one flow per start (next == nflows).
     */
    for ( ;; )
    {
        int64_t now = now_ns(), wake = INT64_MAX;
        struct timespec ts;
        size_t np = 0, kept = 0;
        int more, rc;

        /* Time out stale flows, drop ended ones. */
        for ( i = 0; i < nactive; i++ )
        {
            struct flow *f = &flows[active[i]];

            if ( f->state != DONE && now - f->start_ns >= timeout_ns )
                finish(f, -1);
            if ( f->state != DONE )
                active[kept++] = active[i];
            else if ( o.concurrency )
                backoff_note(&backoff, f, now);
        }
        nactive = kept;
        now = now_ns();

        /*
         * Start every flow that is due: --rate, each whose scheduled time
         * has come (all at once if we fell behind); --concurrency, as many
         * as keep N flows live while the duration runs.
         */
        for ( ;; )
        {
            struct flow *f;

            if ( o.concurrency )
                more = next < o.max_flows &&
                       (next == 0 || now - t0 < duration_ns);
            else
                more = next < nflows;
            if ( !more ||
                 (o.concurrency ? nactive >= o.concurrency ||
                                  now < backoff.not_before :
                                  next > 0 && now < t0 + flows[next].offset_ns) )
                break;
            if ( o.concurrency && !add_flow(&flows, &nflows, &cap) )
            {
                o.max_flows = next;     /* start no more, report the rest */
                more = 0;
                break;
            }
            f = &flows[next];
            start_flow(f, &o, now);
            if ( next == 0 )
                t0 = f->start_ns;
            if ( f->state == SENDING )
                pump_send(f, &o);
            if ( f->state != DONE )
                active[nactive++] = next;
            else if ( o.concurrency )
                backoff_note(&backoff, f, now_ns());
            next++;
            now = now_ns();
        }
        if ( more && !o.concurrency )
            wake = t0 + flows[next].offset_ns;
        else if ( more && now < backoff.not_before )
            wake = backoff.not_before;
        if ( !more && nactive == 0 )
            break;

        /* Poll the live flows until the next start or timeout. */
        for ( i = 0; i < nactive; i++ )
        {
            struct flow *f = &flows[active[i]];

            if ( f->start_ns + timeout_ns < wake )
                wake = f->start_ns + timeout_ns;
            pfds[np].fd = f->fd;
            pfds[np].events = f->state == WAITING_EOF ? POLLIN : POLLOUT;
            pfds[np++].revents = 0;
        }

        if ( wake < now )
            wake = now;
        ts.tv_sec = (wake - now) / NS_PER_S;
        ts.tv_nsec = (wake - now) % NS_PER_S;
        rc = ppoll(pfds, np, wake == INT64_MAX ? NULL : &ts, NULL);
        if ( rc < 0 && errno != EINTR )
        {
            perror("flowgen: ppoll");
            return 1;
        }
        for ( i = 0; rc > 0 && i < np; i++ )
            if ( pfds[i].revents )
                handle_event(&flows[active[i]], pfds[i].revents, &o);
    }

    print_results(flows, nflows);
    print_summary(flows, nflows, &o);
    for ( i = 0; i < nflows; i++ )
        if ( flows[i].err )
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    if ( argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) )
    {
        usage(stdout);
        return 0;
    }
    if ( argc >= 2 && !strcmp(argv[1], "server") )
        return run_server(argc, argv);
    if ( argc >= 2 && !strcmp(argv[1], "client") )
        return run_client(argc, argv);
    if ( argc >= 2 )
        usage_error("unknown mode '%s' (expected server or client)", argv[1]);
    usage_error("missing mode (server or client)");
}

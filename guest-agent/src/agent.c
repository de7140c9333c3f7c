/*
 * selena guest agent: runs the commands Dom0 writes into this guest's
 * Xenstore directory and reports their state and output there
 * (PROTOCOL.md). Single-threaded: one poll() loop over the xenbus device,
 * SIGCHLD, a heartbeat timer and the commands' output pipes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "netconf.h"
#include "spec.h"
#include "xs.h"
#include "xstool.h"

#define MAX_CMDS 64
#define CHUNK_BYTES 2048
#define WINDOW_CHUNKS 16
/*
 * Unacknowledged chunks of all running commands together: each is a Xenstore
 * entry of this domain, and oxenstored's default quota is 1000 entries per
 * domain (quota-maxentity), which 64 commands x 2 streams x WINDOW_CHUNKS
 * would pass; the rest of the quota is left to the commands' other keys.
 */
#define TOTAL_WINDOW_CHUNKS 512
#define EOF_GRACE_NS 2000000000ull  /* after exit, wait this long for pipe EOF */
/* A refused final state is tried again this often, after 10, 20, 40 ms. */
#define FINAL_TRIES 4
#define FINAL_BACKOFF_MS 10
/*
 * Linux's RNDADDENTROPY and its argument (linux/random.h), spelled out so
 * the agent builds without kernel headers.
 */
#define RNDADDENTROPY_IOCTL 0x40085203u
#define SEED_BYTES_MAX 64
#define WATCH_TOKEN "selena-cmd"
#define VERSION_TOKEN "selena-version"

struct stream {
    int fd;             /* -1 once at EOF */
    unsigned int seq;   /* chunks written */
    unsigned int acked; /* chunks Dom0 has consumed */
    unsigned long long lost; /* bytes whose chunk could not be written */
};

struct cmd {
    int used;
    char id[CMD_ID_MAX + 1];
    pid_t pid;
    int exited;
    int status;
    struct stream out[2];
    uint64_t start_rt, start_mono, end_rt, end_mono, deadline_mono;
    const char *kill_reason;
    int spec_removed;   /* Dom0 removed it while it ran: no removal to wait for */
};

static struct xs_conn xs;
static struct cmd cmds[MAX_CMDS];
/*
 * Sessions (setsid) of this experiment's commands, finished ones included: a
 * background child outlives its command's shell and keeps the session id,
 * so the next experiment can find and kill it. A ring; the oldest go first.
 */
#define SESSION_GROUPS 1024
static pid_t session_groups[SESSION_GROUPS];
static unsigned int session_group_count;
/*
 * Ids of commands this session has answered (a final or failed state written)
 * whose removal by Dom0 has not been seen yet. Past its start, the only event
 * on exactly cmd/<id> is that removal, so it costs no Xenstore read, and the
 * id leaves the set (Dom0 may use it again). A ring; an id that fell out of
 * it is still handled correctly, by reading its spec.
 */
#define ANSWERED_IDS 128
static char answered[ANSWERED_IDS][CMD_ID_MAX + 1];
static unsigned int answered_count;
static const char *random_device = "/dev/random";   /* --random: tests */
static char home[64];      /* /local/domain/<id>/selena */
/* Dom0 asked for end markers ($S/features): set per session. */
static int end_markers;
static sigset_t sigchld_set;

static void version_changed(void);

static void logmsg(const char *fmt, ...)
{
    va_list ap;

    fputs("selena-agent: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static uint64_t now_ns(clockid_t clk)
{
    struct timespec ts;

    clock_gettime(clk, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int put(const char *suffix, const char *value)
{
    char path[256];
    int rc;

    snprintf(path, sizeof(path), "%s/%s", home, suffix);
    rc = xs_write_str(&xs, path, value);
    if ( rc )
        logmsg("write %s: %s", path, xs_errname(rc));
    return rc;
}

static int get(const char *suffix, char **value, size_t *len)
{
    char path[256];

    snprintf(path, sizeof(path), "%s/%s", home, suffix);
    return xs_read(&xs, path, value, len);
}

/*
 * `running` goes to agent/started/<id>, not to out/<id>/state: Dom0 then reads
 * state only when it is final (each state event was a read, and `running` told
 * it nothing), and, watching only agent/state and agent/error of our agent
 * directory, is not even woken by it.
 */
static void set_started(const char *id, int pid, unsigned long long start)
{
    char suffix[128], value[96];

    snprintf(value, sizeof(value), "running pid=%d start=%llu", pid, start);
    snprintf(suffix, sizeof(suffix), "agent/started/%s", id);
    put(suffix, value);
}

/*
 * The final state is all Dom0 waits for.
 *
 * With a marker (exited and killed), it goes into agent/started/<id>, over
 * `running`, and into the name of an empty node of its own,
 * out/<id>/end/<marker> (fields joined by _: Xenstore names allow no space
 * or =), in that order: Dom0 takes the state from the marker's path (a read
 * fewer per command on its side), and the one event it gets is the
 * marker's, as Dom0 watches out/ but not agent/started/. started/<id> keeps
 * the state for a Dom0 that has to look again; written first, it is there
 * before Dom0, seeing the marker, removes it. Only a Dom0 that asked for
 * markers gets them: an older one waits for `state`.
 *
 * Without a marker (failed, or not asked for), or if either write is
 * refused, the state goes to out/<id>/state, which Dom0 reads on its event;
 * a refusal there (EQUOTA while the domain's entries are taken, say) is
 * tried again a few times, then reported on agent/error, so the command
 * fails at once instead of at its timeout.
 */
static void write_final(const char *id, const char *marker, const char *value)
{
    struct timespec pause = { 0, FINAL_BACKOFF_MS * 1000000L };
    char path[256], marker_path[512], report[128];
    unsigned int try;
    int rc = 0, marker_rc;

    if ( marker )
    {
        snprintf(path, sizeof(path), "%s/agent/started/%s", home, id);
        snprintf(marker_path, sizeof(marker_path), "%s/out/%s/end/%s", home, id,
                 marker);
        /* One after the other: with both requests in flight at once the
         * agent stalled now and then on the guest's xenbus device. */
        rc = xs_write_str(&xs, path, value);
        marker_rc = xs_write_str(&xs, marker_path, "");
        if ( rc )
            logmsg("write %s: %s", path, xs_errname(rc));
        if ( marker_rc )
            logmsg("write %s: %s", marker_path, xs_errname(marker_rc));
        if ( rc == 0 && marker_rc == 0 )
            return;
    }
    snprintf(path, sizeof(path), "%s/out/%s/state", home, id);
    for ( try = 0; try < FINAL_TRIES; try++ )
    {
        if ( try )
        {
            nanosleep(&pause, NULL);
            pause.tv_nsec *= 2;
        }
        rc = xs_write_str(&xs, path, value);
        if ( rc == 0 )
            return;
        logmsg("write %s: %s", path, xs_errname(rc));
    }
    logmsg("final state of %s lost after %u tries: %s", id, FINAL_TRIES,
           xs_errname(rc));
    snprintf(report, sizeof(report), "lost-state %s %s", id, xs_errname(rc));
    put("agent/error", report);
}

static void set_final_state(const char *id, const char *fmt, ...)
{
    char value[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(value, sizeof(value), fmt, ap);
    va_end(ap);
    write_final(id, NULL, value);
}

static void remember_answered(const char *id)
{
    snprintf(answered[answered_count++ % ANSWERED_IDS], CMD_ID_MAX + 1, "%s", id);
}

/* Was this id answered? Then this event is its removal: forget it. */
static int take_answered(const char *id)
{
    unsigned int i;

    for ( i = 0; i < ANSWERED_IDS && i < answered_count; i++ )
        if ( strcmp(answered[i], id) == 0 )
        {
            answered[i][0] = '\0';
            return 1;
        }
    return 0;
}

static void report_failed(const char *id, const char *reason, const char *detail)
{
    char esc[512];

    remember_answered(id);
    set_final_state(id, "failed reason=%s detail=%s", reason,
                    escape(detail, esc, sizeof(esc)));
}

static struct cmd *find_cmd(const char *id)
{
    unsigned int i;

    for ( i = 0; i < MAX_CMDS; i++ )
        if ( cmds[i].used && strcmp(cmds[i].id, id) == 0 )
            return &cmds[i];
    return NULL;
}

static int set_nonblock(int fd)
{
    int flags = fcntl(fd, F_GETFL);

    return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

/* Fork and exec; returns the pid, or -errno with the exec failure. */
static pid_t spawn(const struct spec *s, int out_fd, int err_fd)
{
    int errpipe[2], child_errno = 0;
    pid_t pid;
    ssize_t n;

    if ( pipe2(errpipe, O_CLOEXEC) )
        return -errno;
    pid = fork();
    if ( pid < 0 )
    {
        int err = -errno;

        close(errpipe[0]);
        close(errpipe[1]);
        return err;
    }
    if ( pid == 0 )
    {
        int devnull = open("/dev/null", O_RDONLY);
        unsigned int i;
        int sig;

        sigprocmask(SIG_UNBLOCK, &sigchld_set, NULL);
        /*
         * Default dispositions, whatever the agent inherited: a guest's init
         * starting it as a background job of a non-interactive shell leaves
         * SIGINT and SIGQUIT ignored, and an exec keeps them ignored, so a
         * kill with SIGINT (Mininet's sendInt) would do nothing.
         */
        for ( sig = 1; sig < NSIG; sig++ )
            if ( sig != SIGKILL && sig != SIGSTOP )
                signal(sig, SIG_DFL);
        setsid(); /* its own process group, so kill reaches its children */
        if ( devnull >= 0 )
            dup2(devnull, 0);
        dup2(out_fd, 1);
        dup2(err_fd, 2);
        for ( i = 0; i < s->envc; i++ )
            putenv(s->env[i]);
        if ( chdir(s->cwd ? s->cwd : "/") == 0 )
        {
            if ( s->shell )
                execl("/bin/sh", "sh", "-c", s->shell, (char *)NULL);
            else
                execvp(s->argv[0], s->argv);
        }
        child_errno = errno;
        n = write(errpipe[1], &child_errno, sizeof(child_errno));
        (void)n;
        _exit(127);
    }
    close(errpipe[1]);
    do
        n = read(errpipe[0], &child_errno, sizeof(child_errno));
    while ( n < 0 && errno == EINTR );
    close(errpipe[0]);
    if ( n == sizeof(child_errno) )
    {
        waitpid(pid, NULL, 0);
        return -child_errno;
    }
    return pid;
}

static void start_command(const char *id)
{
    char suffix[128], detail[256];
    char *buf;
    size_t len;
    const char *reason;
    struct spec s;
    struct cmd *c = NULL;
    int outp[2] = { -1, -1 }, errp[2] = { -1, -1 };
    unsigned int i;
    pid_t pid;
    int rc;

    snprintf(suffix, sizeof(suffix), "cmd/%s", id);
    rc = get(suffix, &buf, &len);
    if ( rc )
        return; /* removed meanwhile */
    rc = spec_parse(buf, len, &s, &reason, detail, sizeof(detail));
    free(buf);
    if ( rc )
    {
        report_failed(id, reason, detail);
        return;
    }
    for ( i = 0; i < MAX_CMDS && !c; i++ )
        if ( !cmds[i].used )
            c = &cmds[i];
    if ( !c )
    {
        report_failed(id, "busy", "too many commands running");
        goto out;
    }
    if ( pipe2(outp, O_CLOEXEC) || pipe2(errp, O_CLOEXEC) )
    {
        report_failed(id, "exec", strerror(errno));
        goto out;
    }
    memset(c, 0, sizeof(*c));
    c->start_rt = now_ns(CLOCK_REALTIME);
    c->start_mono = now_ns(CLOCK_MONOTONIC);
    pid = spawn(&s, outp[1], errp[1]);
    if ( pid < 0 )
    {
        snprintf(detail, sizeof(detail), "%s: %s",
                 s.shell ? "/bin/sh" : s.argv[0], strerror((int)-pid));
        report_failed(id, "exec", detail);
        goto out;
    }
    c->used = 1;
    snprintf(c->id, sizeof(c->id), "%s", id);
    c->pid = pid;
    session_groups[session_group_count++ % SESSION_GROUPS] = pid;
    c->out[0].fd = outp[0];
    c->out[1].fd = errp[0];
    outp[0] = errp[0] = -1;
    set_nonblock(c->out[0].fd);
    set_nonblock(c->out[1].fd);
    if ( s.timeout_ns )
        c->deadline_mono = c->start_mono + s.timeout_ns;
    set_started(id, (int)pid, (unsigned long long)c->start_rt);
 out:
    for ( i = 0; i < 2; i++ )
    {
        if ( outp[i] >= 0 )
            close(outp[i]);
        if ( errp[i] >= 0 )
            close(errp[i]);
    }
    spec_free(&s);
}

/* Is this command id finished or being handled already? */
static int known(const char *id)
{
    char suffix[128];
    char *val;
    int rc;

    if ( find_cmd(id) )
        return 1;
    snprintf(suffix, sizeof(suffix), "out/%s/state", id);
    rc = get(suffix, &val, NULL);
    if ( rc == -ENOENT )
    {
        snprintf(suffix, sizeof(suffix), "agent/started/%s", id);
        rc = get(suffix, &val, NULL);
    }
    if ( rc == 0 )
        free(val);
    return rc != -ENOENT;
}

static void rescan(void)
{
    char path[128];
    char *names, *p;
    size_t len;

    snprintf(path, sizeof(path), "%s/cmd", home);
    if ( xs_directory(&xs, path, &names, &len) )
        return;
    for ( p = names; p < names + len; p += strlen(p) + 1 )
    {
        if ( !*p )
            continue;
        if ( !valid_cmd_id(p) )
        {
            logmsg("ignoring command with invalid id");
            continue;
        }
        if ( !known(p) )
            start_command(p);
    }
    free(names);
}

static void read_ack(struct cmd *c)
{
    char suffix[128];
    char *val;
    unsigned int a, b;

    snprintf(suffix, sizeof(suffix), "cmd/%s/ack", c->id);
    if ( get(suffix, &val, NULL) )
        return;
    if ( sscanf(val, "%u %u", &a, &b) == 2 )
    {
        if ( a > c->out[0].acked && a <= c->out[0].seq )
            c->out[0].acked = a;
        if ( b > c->out[1].acked && b <= c->out[1].seq )
            c->out[1].acked = b;
    }
    free(val);
}

static void read_kill(struct cmd *c)
{
    char suffix[128];
    char *val, *end;
    long sig;

    snprintf(suffix, sizeof(suffix), "cmd/%s/kill", c->id);
    if ( get(suffix, &val, NULL) )
        return;
    sig = strtol(val, &end, 10);
    if ( end != val && *end == '\0' && sig > 0 && sig < 65 )
    {
        if ( !c->kill_reason )
            c->kill_reason = "kill";
        kill(-c->pid, (int)sig);
    }
    free(val);
}

/* A watch event under <home>/cmd (absolute or relative path). */
static void handle_event(const char *path)
{
    const char *rest = NULL, *slash;
    char id[CMD_ID_MAX + 1];
    struct cmd *c;
    size_t n;

    /* Absolute or relative (as the watch was registered), either way. */
    if ( strncmp(path, home, strlen(home)) == 0 )
        rest = path + strlen(home);
    else if ( (rest = strstr(path, "selena/cmd")) != NULL )
        rest += strlen("selena");
    if ( !rest || strncmp(rest, "/cmd", 4) != 0 )
        return;
    rest += 4;
    if ( *rest == '\0' )
    {
        rescan();
        return;
    }
    rest++;
    slash = strchr(rest, '/');
    n = slash ? (size_t)(slash - rest) : strlen(rest);
    if ( n == 0 || n > CMD_ID_MAX )
        return;
    memcpy(id, rest, n);
    id[n] = '\0';
    c = find_cmd(id);
    if ( !slash )
    {
        /*
         * A new command, or Dom0 removing one. No state read first (known()
         * is for rescans): each read is a Xenstore round trip on the way to
         * the command's start, and a removed spec reads as ENOENT.
         */
        if ( c )
            c->spec_removed = 1;    /* it started on its creation event */
        else if ( valid_cmd_id(id) && !take_answered(id) )
            start_command(id);
        return;
    }
    if ( !c )
        return;
    if ( strcmp(slash, "/ack") == 0 )
        read_ack(c);
    else if ( strcmp(slash, "/kill") == 0 )
        read_kill(c);
}

static unsigned int unacked_chunks(void)
{
    unsigned int i, k, total = 0;

    for ( i = 0; i < MAX_CMDS; i++ )
        if ( cmds[i].used )
            for ( k = 0; k < 2; k++ )
                total += cmds[i].out[k].seq - cmds[i].out[k].acked;
    return total;
}

static int window_open(const struct stream *s)
{
    return s->fd >= 0 && s->seq - s->acked < WINDOW_CHUNKS &&
           unacked_chunks() < TOTAL_WINDOW_CHUNKS;
}

/* Move one chunk from a pipe to Xenstore; at EOF close the pipe. */
static void pump_stream(struct cmd *c, unsigned int which, int at_grace)
{
    static const char *const names[] = { "stdout", "stderr" };
    struct stream *s = &c->out[which];
    char buf[CHUNK_BYTES], suffix[128];
    ssize_t n;

    if ( !window_open(s) )
        return;
    n = read(s->fd, buf, sizeof(buf));
    if ( n < 0 && (errno == EAGAIN || errno == EINTR) )
    {
        /* Exited, and whoever still holds the pipe is not the command. */
        if ( !at_grace )
            return;
        n = 0;
    }
    if ( n <= 0 )
    {
        close(s->fd);
        s->fd = -1;
        return;
    }
    snprintf(suffix, sizeof(suffix), "out/%s/%s/%u", c->id, names[which], s->seq);
    {
        char path[256];

        snprintf(path, sizeof(path), "%s/%s", home, suffix);
        if ( xs_write(&xs, path, buf, (size_t)n) == 0 )
            s->seq++;
        else
        {
            /* Counted into the final state: Dom0 must not see it as whole. */
            s->lost += (unsigned long long)n;
            logmsg("lost %zd bytes of %s output", n, c->id);
        }
    }
}

static void finish_if_done(struct cmd *c)
{
    unsigned long long dur, lost, start, end;
    char value[256], marker[200];
    const char *reason;
    int sig;

    if ( !c->exited || c->out[0].fd >= 0 || c->out[1].fd >= 0 )
        return;
    dur = (unsigned long long)(c->end_mono - c->start_mono);
    lost = c->out[0].lost + c->out[1].lost;
    start = (unsigned long long)c->start_rt;
    end = (unsigned long long)c->end_rt;
    if ( WIFSIGNALED(c->status) )
    {
        sig = WTERMSIG(c->status);
        reason = c->kill_reason ? c->kill_reason : "signal";
        snprintf(value, sizeof(value),
                 "killed signal=%d reason=%s start=%llu end=%llu dur=%llu "
                 "stdout=%u stderr=%u lost=%llu", sig, reason, start, end, dur,
                 c->out[0].seq, c->out[1].seq, lost);
        snprintf(marker, sizeof(marker), "killed_%d_%s_%llu_%llu_%llu_%u_%u_%llu",
                 sig, reason, start, end, dur, c->out[0].seq, c->out[1].seq, lost);
    }
    else
    {
        snprintf(value, sizeof(value),
                 "exited code=%d start=%llu end=%llu dur=%llu stdout=%u "
                 "stderr=%u lost=%llu", WEXITSTATUS(c->status), start, end, dur,
                 c->out[0].seq, c->out[1].seq, lost);
        snprintf(marker, sizeof(marker), "exited_%d_%llu_%llu_%llu_%u_%u_%llu",
                 WEXITSTATUS(c->status), start, end, dur, c->out[0].seq,
                 c->out[1].seq, lost);
    }
    write_final(c->id, end_markers ? marker : NULL, value);
    if ( !c->spec_removed )
        remember_answered(c->id);
    c->used = 0;
}

static void reap(void)
{
    int status;
    pid_t pid;
    unsigned int i;

    while ( (pid = waitpid(-1, &status, WNOHANG)) > 0 )
        for ( i = 0; i < MAX_CMDS; i++ )
            if ( cmds[i].used && cmds[i].pid == pid )
            {
                cmds[i].exited = 1;
                cmds[i].status = status;
                cmds[i].end_rt = now_ns(CLOCK_REALTIME);
                cmds[i].end_mono = now_ns(CLOCK_MONOTONIC);
            }
}

static void enforce_timeouts(uint64_t mono)
{
    unsigned int i;

    for ( i = 0; i < MAX_CMDS; i++ )
    {
        struct cmd *c = &cmds[i];

        /* Also after the shell exited: a child may still hold its output. */
        if ( c->used && c->deadline_mono &&
             mono >= c->deadline_mono && !c->kill_reason )
        {
            c->kill_reason = "timeout";
            kill(-c->pid, SIGKILL);
        }
    }
}

/* ---- session start: network, warm start ---- */

static int hex_digit(char c)
{
    if ( c >= '0' && c <= '9' )
        return c - '0';
    if ( c >= 'a' && c <= 'f' )
        return c - 'a' + 10;
    return -1;
}

/*
 * Credit Dom0's seed ($S/seed, hex) to the kernel's entropy pool, so that its
 * random number generator is ready before any command runs. Unseeded, the
 * first read of /dev/urandom or getrandom() (iperf3 makes one at start) spins
 * the vCPU collecting timer jitter for about a guest second: at TDF 20 that
 * is 20 real seconds of a full vCPU, which the fidelity monitor saw as a
 * saturated guest. Reports on agent/seed.
 */
static void seed_random(void)
{
    struct {
        int entropy_count;
        int buf_size;
        unsigned char buf[SEED_BYTES_MAX];
    } seed;
    char *hex;
    size_t len, i;
    int fd, ok;

    if ( get("seed", &hex, &len) )
        return;                 /* an older controller: nothing to credit */
    if ( len == 0 )
    {
        free(hex);
        return;                 /* none given */
    }
    ok = len % 2 == 0 && len / 2 <= SEED_BYTES_MAX;
    for ( i = 0; ok && i < len / 2; i++ )
    {
        int high = hex_digit(hex[2 * i]), low = hex_digit(hex[2 * i + 1]);

        ok = high >= 0 && low >= 0;
        if ( ok )
            seed.buf[i] = (unsigned char)(high << 4 | low);
    }
    free(hex);
    if ( !ok )
    {
        put("agent/seed", "failed bad seed");
        return;
    }
    seed.buf_size = (int)(len / 2);
    seed.entropy_count = seed.buf_size * 8;
    fd = open(random_device, O_WRONLY | O_CLOEXEC);
    if ( fd < 0 || ioctl(fd, RNDADDENTROPY_IOCTL, &seed) < 0 )
    {
        char msg[80];

        snprintf(msg, sizeof(msg), "failed %s", strerror(errno));
        put("agent/seed", msg);
    }
    else
        put("agent/seed", "ok");
    if ( fd >= 0 )
        close(fd);
    memset(&seed, 0, sizeof(seed));
}

/* Apply the network directives (netconf.c) and report on agent/net. */
static void configure_network(void)
{
    char *buf, result[700];
    size_t len;

    if ( get("net", &buf, &len) )
    {
        put("agent/net", "ok");
        return;
    }
    netconf_apply(buf, result, sizeof(result));
    free(buf);
    put("agent/net", result);
}

/*
 * Warm start: no command of the previous experiment survives into the next.
 * (Its interfaces do not either: Dom0 detaches them before pooling us.)
 */
static int our_session(long sid)
{
    unsigned int i, n = session_group_count < SESSION_GROUPS ? session_group_count
                                                             : SESSION_GROUPS;

    for ( i = 0; i < n; i++ )
        if ( session_groups[i] == sid )
            return 1;
    return 0;
}

/* SIGKILL every process left in a session of this experiment's commands. */
static void kill_leftovers(void)
{
    DIR *proc = opendir("/proc");
    struct dirent *entry;

    if ( !proc )
        return;
    while ( (entry = readdir(proc)) != NULL )
    {
        char path[64], stat[512], *close_paren;
        long pid = strtol(entry->d_name, NULL, 10), sid;
        ssize_t n;
        int fd;

        if ( pid <= 1 || pid == (long)getpid() )
            continue;
        snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if ( fd < 0 )
            continue;
        n = read(fd, stat, sizeof(stat) - 1);
        close(fd);
        if ( n <= 0 )
            continue;
        stat[n] = '\0';
        /* "pid (comm) state ppid pgrp session ...": comm may hold spaces. */
        close_paren = strrchr(stat, ')');
        if ( close_paren &&
             sscanf(close_paren + 1, " %*c %*d %*d %ld", &sid) == 1 &&
             our_session(sid) )
            kill((pid_t)pid, SIGKILL);
    }
    closedir(proc);
    session_group_count = 0;
}

static void forget_previous_experiment(void)
{
    unsigned int i;

    for ( i = 0; i < MAX_CMDS; i++ )
    {
        if ( !cmds[i].used )
            continue;
        kill(-cmds[i].pid, SIGKILL);
        if ( cmds[i].out[0].fd >= 0 )
            close(cmds[i].out[0].fd);
        if ( cmds[i].out[1].fd >= 0 )
            close(cmds[i].out[1].fd);
        cmds[i].used = 0;
    }
    kill_leftovers();
    reap();
    answered_count = 0;
}

/* ---- main loop ---- */

static void heartbeat(void)
{
    static unsigned long long seq;
    char value[64];

    char path[256];

    snprintf(value, sizeof(value), "%llu %llu", ++seq,
             (unsigned long long)now_ns(CLOCK_REALTIME));
    /* Quietly: between experiments (warm pool) our keys do not exist. */
    snprintf(path, sizeof(path), "%s/agent/heartbeat", home);
    xs_write_str(&xs, path, value);
}

static int next_timeout_ms(uint64_t mono)
{
    uint64_t soonest = UINT64_MAX;
    unsigned int i;

    for ( i = 0; i < MAX_CMDS; i++ )
    {
        const struct cmd *c = &cmds[i];
        uint64_t t = UINT64_MAX;

        if ( !c->used )
            continue;
        if ( c->exited )
            t = c->end_mono + EOF_GRACE_NS;
        else if ( c->deadline_mono && !c->kill_reason )
            t = c->deadline_mono;
        if ( t < soonest )
            soonest = t;
    }
    if ( soonest == UINT64_MAX )
        return -1;
    if ( soonest <= mono )
        return 0;
    return (int)((soonest - mono) / 1000000ull + 1);
}

/* Handle the events queued on the connection; after lost ones, re-read
 * everything that events would announce. */
static void dispatch_events(void)
{
    struct xs_event ev;
    unsigned int i;

    while ( xs_next_event(&xs, &ev) )
    {
        if ( strcmp(ev.token, WATCH_TOKEN) == 0 )
            handle_event(ev.path);
        else if ( strcmp(ev.token, VERSION_TOKEN) == 0 )
            version_changed();
        free(ev.path);
        free(ev.token);
    }
    if ( xs.ev_dropped )
    {
        xs.ev_dropped = 0;
        rescan();
        for ( i = 0; i < MAX_CMDS; i++ )
            if ( cmds[i].used )
            {
                read_ack(&cmds[i]);
                read_kill(&cmds[i]);
            }
    }
}

/* Kill commands past their timeout; drain what exited ones left in their
 * pipes once the EOF grace is over; finish the commands that are done. */
static void advance_commands(uint64_t mono)
{
    unsigned int i;

    enforce_timeouts(mono);
    for ( i = 0; i < MAX_CMDS; i++ )
    {
        struct cmd *c = &cmds[i];
        unsigned int k;

        if ( !c->used )
            continue;
        for ( k = 0; k < 2; k++ )
            if ( c->exited && mono >= c->end_mono + EOF_GRACE_NS )
                pump_stream(c, k, 1);
        finish_if_done(c);
    }
}

/* What serve() polls: the xenbus device, SIGCHLD, the heartbeat timer, then
 * each output pipe whose window is open (its command and stream alongside). */
struct poll_set {
    struct pollfd pfd[3 + 2 * MAX_CMDS];
    struct cmd *owner[3 + 2 * MAX_CMDS];
    unsigned int which[3 + 2 * MAX_CMDS];
    unsigned int n;
};

static void fill_poll_set(struct poll_set *ps, int sfd, int tfd)
{
    unsigned int i;

    ps->n = 0;
    ps->pfd[ps->n++] = (struct pollfd){ .fd = xs.fd, .events = POLLIN };
    ps->pfd[ps->n++] = (struct pollfd){ .fd = sfd, .events = POLLIN };
    ps->pfd[ps->n++] = (struct pollfd){ .fd = tfd, .events = POLLIN };
    for ( i = 0; i < MAX_CMDS; i++ )
    {
        unsigned int k;

        if ( !cmds[i].used )
            continue;
        for ( k = 0; k < 2; k++ )
            if ( window_open(&cmds[i].out[k]) )
            {
                ps->owner[ps->n] = &cmds[i];
                ps->which[ps->n] = k;
                ps->pfd[ps->n++] = (struct pollfd){ .fd = cmds[i].out[k].fd,
                                                    .events = POLLIN };
            }
    }
}

/* Act on what poll() found ready. Returns 0, or 1 when the xenbus
 * connection failed (fatal). */
static int handle_ready(const struct poll_set *ps, int sfd, int tfd)
{
    unsigned int i;
    int rc;

    if ( ps->pfd[0].revents )
    {
        rc = xs_pump(&xs);
        if ( rc )
        {
            logmsg("xenbus: %s", strerror(-rc));
            return 1;
        }
    }
    if ( ps->pfd[1].revents )
    {
        struct signalfd_siginfo si;

        while ( read(sfd, &si, sizeof(si)) == sizeof(si) )
            ;
        reap();
    }
    if ( ps->pfd[2].revents )
    {
        uint64_t ticks;

        if ( read(tfd, &ticks, sizeof(ticks)) == sizeof(ticks) )
            heartbeat();
    }
    for ( i = 3; i < ps->n; i++ )
        if ( ps->pfd[i].revents )
            pump_stream(ps->owner[i], ps->which[i], 0);
    return 0;
}

static int serve(void)
{
    struct itimerspec every_second = { { 1, 0 }, { 1, 0 } };
    int sfd, tfd;

    sfd = signalfd(-1, &sigchld_set, SFD_CLOEXEC | SFD_NONBLOCK);
    tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if ( sfd < 0 || tfd < 0 || timerfd_settime(tfd, 0, &every_second, NULL) )
    {
        logmsg("signalfd/timerfd: %s", strerror(errno));
        return 1;
    }
    heartbeat();
    for ( ;; )
    {
        struct poll_set ps;
        uint64_t mono;
        int rc;

        dispatch_events();
        mono = now_ns(CLOCK_MONOTONIC);
        advance_commands(mono);
        fill_poll_set(&ps, sfd, tfd);
        /* Events queued by what ran above: handle them before sleeping. */
        if ( xs.ev_count )
            continue;
        rc = poll(ps.pfd, ps.n, next_timeout_ms(mono));
        if ( rc < 0 && errno != EINTR )
        {
            logmsg("poll: %s", strerror(errno));
            return 1;
        }
        if ( rc > 0 && handle_ready(&ps, sfd, tfd) )
            return 1;
    }
}

/*
 * (Re)start serving an experiment: check the controller's version, apply the
 * network directives, report ready. Dom0 re-creates our keys when it reuses
 * this guest from its warm pool; then commands of the previous experiment are
 * killed and old addresses flushed first. Returns 0, -1 when there are no
 * control keys (nothing to serve), or 1 on a fatal mismatch.
 */
/*
 * We were restarted within a session (init respawns the agent): the commands
 * our predecessor was running have no one to report them. Kill what is left
 * of each and fail it, rather than leave Dom0 waiting.
 */
static void fail_orphans(void)
{
    char path[128], suffix[160];
    char *names, *p, *state;
    size_t len;

    snprintf(path, sizeof(path), "%s/cmd", home);
    if ( xs_directory(&xs, path, &names, &len) )
        return;
    for ( p = names; p < names + len; p += strlen(p) + 1 )
    {
        long pid;

        if ( !*p || !valid_cmd_id(p) )
            continue;
        snprintf(suffix, sizeof(suffix), "out/%s/state", p);
        if ( get(suffix, &state, NULL) == 0 )
        {
            free(state);        /* answered already */
            continue;
        }
        snprintf(suffix, sizeof(suffix), "agent/started/%s", p);
        if ( get(suffix, &state, NULL) )
            continue;
        if ( sscanf(state, "running pid=%ld", &pid) == 1 )
        {
            if ( pid > 1 )
                kill(-(pid_t)pid, SIGKILL);
            report_failed(p, "restarted",
                          "the guest agent restarted while the command ran");
        }
        free(state);
    }
    free(names);
}

/*
 * $S/features: the words Dom0 speaks beyond the protocol's version, one
 * read per session. Absent (an older Dom0) or unreadable means none.
 */
static int asked_for_end_markers(void)
{
    char *val, *word, *save;
    size_t len;
    int found = 0;

    if ( get("features", &val, &len) )
        return 0;
    for ( word = strtok_r(val, " ", &save); word; word = strtok_r(NULL, " ", &save) )
        if ( strcmp(word, "end-markers") == 0 )
            found = 1;
    free(val);
    return found;
}

static int start_session(int first)
{
    char *val;
    size_t len;
    int restarted;
    int rc = get("version", &val, &len);

    if ( rc == -ENOENT || rc == -EACCES )
    {
        if ( first )
            logmsg("no selena control keys in %s; nothing to do", home);
        return -1;
    }
    if ( rc )
    {
        logmsg("reading %s/version: %s", home, xs_errname(rc));
        return 1;
    }
    put("agent/version", "1");
    if ( len != 1 || val[0] != '0' + PROTOCOL_VERSION )
    {
        char msg[80];

        snprintf(msg, sizeof(msg), "failed version %.*s", (int)(len < 16 ? len : 16), val);
        put("agent/state", msg);
        logmsg("controller speaks protocol %.*s, I speak %d",
               (int)(len < 16 ? len : 16), val, PROTOCOL_VERSION);
        free(val);
        return 1;
    }
    free(val);
    restarted = first && get("agent/state", &val, NULL) == 0;
    if ( restarted )
        free(val);
    put("agent/state", "starting");
    end_markers = asked_for_end_markers();
    if ( !first )
        forget_previous_experiment();
    seed_random();
    if ( restarted )
        fail_orphans();         /* the network was configured by our predecessor */
    else
        configure_network();
    put("agent/state", "ready");
    rescan();
    return 0;
}

/* Dom0 re-created our keys (warm start): a new session when our state is gone. */
static void version_changed(void)
{
    char *val;

    if ( get("agent/state", &val, NULL) == 0 )
    {
        free(val);
        return;
    }
    if ( start_session(0) > 0 )
        logmsg("cannot serve the new experiment");
}

static int open_xenbus(const char *device)
{
    struct timespec pause = { 0, 100000000 };
    unsigned int tries;
    int rc = -ENOENT;

    /* The device node can appear a moment after init starts us. */
    for ( tries = 0; tries < 100; tries++ )
    {
        rc = xs_open(&xs, device);
        if ( rc == 0 )
            return 0;
        nanosleep(&pause, NULL);
    }
    logmsg("cannot open %s: %s", device, strerror(-rc));
    return rc;
}

int main(int argc, char **argv)
{
    const char *device = "/dev/xen/xenbus";
    char *val;
    char path[128];
    size_t len;
    int rc;

    while ( argc > 2 && (strcmp(argv[1], "--device") == 0 ||
                         strcmp(argv[1], "--random") == 0) )
    {
        if ( strcmp(argv[1], "--device") == 0 )
            device = argv[2];
        else
            random_device = argv[2];
        argc -= 2;
        argv += 2;
    }
    sigemptyset(&sigchld_set);
    sigaddset(&sigchld_set, SIGCHLD);
    if ( argc > 1 && strcmp(argv[1], "xs") == 0 )
    {
        if ( argc < 4 || open_xenbus(device) )
            return 2;
        return xs_tool(&xs, argc - 2, argv + 2);
    }
    if ( argc > 1 )
    {
        fprintf(stderr, "usage: selena-agent [--device PATH] [--random PATH] [xs ...]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    sigprocmask(SIG_BLOCK, &sigchld_set, NULL);
    if ( open_xenbus(device) )
        return 1;

    /* Absolute paths when the toolstack wrote our domid; otherwise Xenstore
     * resolves relative paths against our own domain. */
    snprintf(home, sizeof(home), "selena");
    if ( xs_read(&xs, "domid", &val, &len) == 0 )
    {
        if ( len > 0 && len < 8 )
            snprintf(home, sizeof(home), "/local/domain/%.*s/selena", (int)len, val);
        free(val);
    }

    snprintf(path, sizeof(path), "%s/cmd", home);
    rc = xs_watch(&xs, path, WATCH_TOKEN);
    if ( rc == 0 )
    {
        snprintf(path, sizeof(path), "%s/version", home);
        rc = xs_watch(&xs, path, VERSION_TOKEN);
    }
    if ( rc )
    {
        logmsg("watch %s: %s", path, xs_errname(rc));
        return 1;
    }
    rc = start_session(1);
    if ( rc != 0 )
        return rc < 0 ? 0 : rc;
    return serve();
}

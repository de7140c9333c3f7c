/*
 * clockcheck: runs inside a guest and reports its clocks and timers on the
 * console, so that Dom0 can timestamp each line on arrival in real time and
 * compare the guest's view with its own (see selena/lab/check_clock.py).
 *
 *   clockcheck SAMPLE_SECONDS[,TIMER_MS[,VCPUS[,WATCHDOG_S[,PENDING_MS]]]]
 *   clockcheck gap VIRTUAL_MS          (freeze check)
 *   clockcheck bench ITERATIONS        (cost of clock reads)
 *
 * Arguments may be separated by commas (the kernel command line passes them
 * as one word).  Output lines (times in guest nanoseconds):
 *   S <monotonic> <realtime> <gettimeofday> <rdtsc>  every 100 ms
 *   P <monotonic> <steal cpu0> <steal cpu1>...  with S: steal per vCPU (ns,
 *                                              from /proc/stat, 10 ms units)
 *   C <leaf3 ecx kHz> <vtsc> <tsc_mode>       CPUID leaf 0x40000003 (Xen)
 *   W <timeout s> <fd>                         watchdog armed (-1: none)
 *   T0 <kind>@<cpu> <monotonic>                before a TIMER_MS timeout
 *   T1 <kind>@<cpu> <monotonic>                after it
 *   M <cpu> <reads> <backwards>                cross-vCPU monotonicity
 *   Q0 <monotonic> <deadline>                  a timer armed at the start
 *                                              for PENDING_MS (Dom0 changes
 *                                              the TDF while it is pending)
 *   Q1 <monotonic>                             when it fired
 *   V <cpu> <monotonic> <realtime>             on further vCPUs, every 100 ms
 *   K <clocksource> <clock event device>      at the start and the end
 *   R <boottime> <RTC seconds> <realtime> <monotonic> <rdtsc>
 *                                              at each RTC update interrupt
 *                                              (/dev/rtc0: HVM guests only)
 *   I <boottime> <PIT ticks> <monotonic> <rdtsc>
 *                                              PIT channel 2's count since
 *                                              the start, every 100 ms
 *                                              (HVM guests only)
 *   DONE
 * R's realtime is CLOCK_REALTIME at the update, i.e. at a whole second of
 * the RTC's date (Dom0 compares the two after each restore).  The TSC
 * (emulated: Xen's virtual time, which runs until a save ends) minus
 * monotonic grows at each resume by the time the guest spent suspended,
 * so Dom0 tells the stretches between checkpoints apart from the guest's
 * own clocks, whatever the console delivered late.  Boottime minus
 * monotonic does not tell them apart: Linux adds as suspended time only
 * what Xen's wall clock gained beyond its own clock's offset from it,
 * which its boot set from the RTC up to half a second off (nothing when
 * the suspend was about as long as that offset: seen in the lab).
 * R and I are timed in CLOCK_BOOTTIME: an HVM guest's save is a suspend
 * to Linux, whose CLOCK_MONOTONIC leaves out the time the guest spent
 * suspended while the RTC and the PIT (and Xen's virtual time) count it.
 * kinds: nanosleep, timerfd, select, poll.  With VCPUS > 1 one process per
 * further vCPU, pinned to it, reads CLOCK_MONOTONIC against a maximum
 * shared by all vCPUs (a read below it went backwards across vCPUs),
 * prints its own clocks every 100 ms (V: their rate after a TDF change on
 * every vCPU, not only vCPU 0's) until vCPU 0's samples end, then runs the
 * timers on its vCPU.  The watchdog (/dev/watchdog, Xen's
 * SCHEDOP_watchdog) is pinged every 500 ms of guest time.
 *
 * gap: reads CLOCK_MONOTONIC and the TSC back to back for VIRTUAL_MS and
 *   prints GAP <largest clock step ns> <reads> <clock step ns> <TSC ticks>,
 *   the last two for the step that took the most TSC ticks (with a native
 *   TSC: the most real time, i.e. a freeze in between, which must not show
 *   in the clock).
 * bench: B <ns per clock_gettime> <ns per rdtsc> (guest time).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/rtc.h>
#include <linux/watchdog.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CPUS 8
#define PIT_HZ 1193182
#define PIT_WRAP 65536

static int watchdog_fd = -1;
static int64_t last_ping;

static int64_t ns(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int64_t tod_ns(void)
{
    struct timeval tv;

    gettimeofday(&tv, NULL); /* the vDSO path in a dynamic guest; a syscall here */
    return (int64_t)tv.tv_sec * 1000000000LL + (int64_t)tv.tv_usec * 1000;
}

static uint64_t rdtsc(void)
{
    uint32_t lo, hi;

    asm volatile ( "rdtsc" : "=a" (lo), "=d" (hi) );
    return ((uint64_t)hi << 32) | lo;
}

/*
 * Xen's own CPUID leaves.  An HVM container (PVH) traps every CPUID, so the
 * plain instruction reaches them; a PV guest's user space may run CPUID on
 * the CPU itself, and then needs Xen's forced-emulation prefix (ud2; "xen";
 * cpuid), which only PV guests have (an HVM guest gets #UD for it).
 */
static void plain_cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4])
{
    asm volatile ( "cpuid"
                   : "=a" (r[0]), "=b" (r[1]), "=c" (r[2]), "=d" (r[3])
                   : "0" (leaf), "2" (sub) );
}

static void fep_cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4])
{
    asm volatile ( "ud2a; .ascii \"xen\"; cpuid"
                   : "=a" (r[0]), "=b" (r[1]), "=c" (r[2]), "=d" (r[3])
                   : "0" (leaf), "2" (sub) );
}

typedef void cpuid_fn(uint32_t leaf, uint32_t sub, uint32_t r[4]);

/* The base of Xen's leaves through `cpuid`, or 0. */
static uint32_t xen_base(cpuid_fn *cpuid)
{
    uint32_t r[4], base;

    for ( base = 0x40000000; base < 0x40010000; base += 0x100 )
    {
        cpuid(base, 0, r);
        if ( r[1] == 0x566e6558 && r[2] == 0x65584d4d && r[3] == 0x4d4d566e )
            return base;
    }
    return 0;
}

static void report_cpuid(void)
{
    cpuid_fn *cpuid = plain_cpuid;
    uint32_t r[4], base = xen_base(plain_cpuid);

    /* Not seen by the plain instruction: a PV guest's CPUID ran natively. */
    if ( !base )
    {
        cpuid = fep_cpuid;
        base = xen_base(fep_cpuid);
    }
    if ( base )
    {
        cpuid(base + 3, 0, r);
        printf("C %u %u %u\n", r[2], r[0] & 1, r[1]);
        return;
    }
    printf("C 0 0 0\n");
}

static void ping(int force)
{
    int64_t now;

    if ( watchdog_fd < 0 )
        return;
    now = ns(CLOCK_MONOTONIC);
    if ( force || now - last_ping >= 500000000LL )
    {
        if ( write(watchdog_fd, "k", 1) != 1 )
            perror("watchdog ping");
        last_ping = now;
    }
}

static void arm_watchdog(int timeout)
{
    if ( timeout > 0 )
    {
        watchdog_fd = open("/dev/watchdog", O_WRONLY);
        if ( watchdog_fd >= 0 &&
             ioctl(watchdog_fd, WDIOC_SETTIMEOUT, &timeout) < 0 )
            perror("WDIOC_SETTIMEOUT");
        ping(1);
    }
    printf("W %d %d\n", timeout, watchdog_fd);
}

static void disarm_watchdog(void)
{
    if ( watchdog_fd >= 0 )
    {
        /* The magic close stops the watchdog. */
        if ( write(watchdog_fd, "V", 1) != 1 )
            perror("watchdog close");
        close(watchdog_fd);
        watchdog_fd = -1;
    }
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

    while ( nanosleep(&ts, &ts) )
        continue;
}

/* Steal time (ns) of each vCPU, from /proc/stat (USER_HZ = 100). */
static int steal(int64_t out[MAX_CPUS])
{
    char line[512];
    FILE *f = fopen("/proc/stat", "r");
    int n = 0;

    if ( !f )
        return 0;
    while ( fgets(line, sizeof(line), f) && n < MAX_CPUS )
    {
        unsigned long long v[8];
        int cpu;

        if ( strncmp(line, "cpu", 3) || line[3] == ' ' )
            continue;
        if ( sscanf(line, "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu",
                    &cpu, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                    &v[7]) == 9 && cpu == n )
            out[n++] = (int64_t)v[7] * 10000000LL;
    }
    fclose(f);
    return n;
}

static void timed(const char *kind, long ms, int cpu)
{
    struct itimerspec its = { 0 };
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    uint64_t expirations;
    int fd;

    ping(1);
    printf("T0 %s@%d %lld\n", kind, cpu, (long long)ns(CLOCK_MONOTONIC));
    fflush(stdout);
    switch ( kind[0] )
    {
    case 'n':
        sleep_ms(ms);
        break;
    case 't':
        fd = timerfd_create(CLOCK_MONOTONIC, 0);
        its.it_value.tv_sec = ms / 1000;
        its.it_value.tv_nsec = (ms % 1000) * 1000000L;
        timerfd_settime(fd, 0, &its, NULL);
        if ( read(fd, &expirations, sizeof(expirations)) < 0 )
            perror("timerfd read");
        close(fd);
        break;
    case 's':
        select(0, NULL, NULL, NULL, &tv);
        break;
    case 'p':
        poll(NULL, 0, (int)ms);
        break;
    }
    printf("T1 %s@%d %lld\n", kind, cpu, (long long)ns(CLOCK_MONOTONIC));
    fflush(stdout);
}

/*
 * A timer pending across whatever Dom0 does to the guest meanwhile (a TDF
 * change, a save and restore): an absolute CLOCK_MONOTONIC timerfd, so
 * that its deadline is one guest instant however the rate changes.
 */
static pid_t pending_timer(long ms)
{
    struct itimerspec its = { 0 };
    uint64_t expirations;
    int64_t start, deadline;
    pid_t pid = fork();
    int fd;

    if ( pid != 0 )
        return pid;
    fd = timerfd_create(CLOCK_MONOTONIC, 0);
    start = ns(CLOCK_MONOTONIC);
    deadline = start + ms * 1000000LL;
    its.it_value.tv_sec = deadline / 1000000000LL;
    its.it_value.tv_nsec = deadline % 1000000000LL;
    printf("Q0 %lld %lld\n", (long long)start, (long long)deadline);
    fflush(stdout);
    if ( fd < 0 || timerfd_settime(fd, TFD_TIMER_ABSTIME, &its, NULL) ||
         read(fd, &expirations, sizeof(expirations)) < 0 )
    {
        perror("pending timer");
        _exit(1);
    }
    printf("Q1 %lld\n", (long long)ns(CLOCK_MONOTONIC));
    fflush(stdout);
    _exit(0);
}

/* The first word of a sysfs file, or "-". */
static void sysfs_word(const char *path, char *out, size_t size)
{
    FILE *f = fopen(path, "r");

    if ( !f || fscanf(f, "%63s", out) != 1 )
        snprintf(out, size, "-");
    if ( f )
        fclose(f);
}

/* Which counter the clocks read and which device fires the timers. */
static void report_clock_devices(void)
{
    char source[64], event[64];

    sysfs_word("/sys/devices/system/clocksource/clocksource0/current_clocksource",
               source, sizeof(source));
    sysfs_word("/sys/devices/system/clockevents/clockevent0/current_device",
               event, sizeof(event));
    printf("K %s %s\n", source, event);
}

/*
 * The RTC's update interrupt once a second of RTC time, each timed in
 * guest time (CLOCK_BOOTTIME, above): an RTC whose date or alarm ran in
 * real time would tick once per TDF guest seconds.
 */
static pid_t rtc_updates(long seconds)
{
    int64_t end;
    pid_t pid;
    int fd = open("/dev/rtc0", O_RDONLY);

    if ( fd < 0 )
        return 0;              /* no legacy RTC: a PV or PVH guest */
    pid = fork();
    if ( pid != 0 )
    {
        close(fd);
        return pid;
    }
    if ( ioctl(fd, RTC_UIE_ON, 0) < 0 )
    {
        perror("RTC_UIE_ON");
        _exit(1);
    }
    end = ns(CLOCK_BOOTTIME) + seconds * 1000000000LL;
    while ( ns(CLOCK_BOOTTIME) < end )
    {
        unsigned long data;
        struct rtc_time tm;
        struct tm t = { 0 };
        int64_t now, real, mono;
        uint64_t tsc;

        struct pollfd update = { .fd = fd, .events = POLLIN };

        /* Three guest seconds without an update: the RTC stopped. */
        if ( poll(&update, 1, 3000) != 1 ||
             read(fd, &data, sizeof(data)) != sizeof(data) )
        {
            printf("R none\n");
            break;
        }
        now = ns(CLOCK_BOOTTIME);
        mono = ns(CLOCK_MONOTONIC);
        tsc = rdtsc();          /* next to monotonic: their gap marks resumes */
        real = ns(CLOCK_REALTIME);
        if ( ioctl(fd, RTC_RD_TIME, &tm) < 0 )
            break;
        t.tm_sec = tm.tm_sec;
        t.tm_min = tm.tm_min;
        t.tm_hour = tm.tm_hour;
        t.tm_mday = tm.tm_mday;
        t.tm_mon = tm.tm_mon;
        t.tm_year = tm.tm_year;
        printf("R %lld %lld %lld %lld %llu\n", (long long)now, (long long)timegm(&t),
               (long long)real, (long long)mono, (unsigned long long)tsc);
    }
    ioctl(fd, RTC_UIE_OFF, 0);
    _exit(0);
}

static int port_fd = -1;

static void port_out(unsigned int port, uint8_t value)
{
    if ( pwrite(port_fd, &value, 1, port) != 1 )
        perror("/dev/port write");
}

static uint8_t port_in(unsigned int port)
{
    uint8_t value = 0;

    if ( pread(port_fd, &value, 1, port) != 1 )
        perror("/dev/port read");
    return value;
}

static unsigned int pit2_count(void)
{
    unsigned int lo, hi;

    port_out(0x43, 0x80);      /* latch channel 2 */
    lo = port_in(0x42);
    hi = port_in(0x42);
    return (hi << 8) | lo;
}

/*
 * PIT channel 2 free-running (mode 2, reload 65536, gate on, speaker off),
 * its count unwrapped: it wraps every 55 ms of guest time, so it is read
 * every 2 ms, and a longer gap (the vCPU descheduled) is unwrapped by the
 * number of whole wraps guest time says passed.
 */
static pid_t pit_ticks(long seconds)
{
    int64_t start, end, last, next_report;
    unsigned int count, prev;
    long long ticks = 0;
    pid_t pid;

    if ( access("/dev/rtc0", F_OK) )
        return 0;              /* no legacy platform: a PV or PVH guest */
    port_fd = open("/dev/port", O_RDWR);
    if ( port_fd < 0 )
    {
        perror("/dev/port");
        return 0;
    }
    pid = fork();
    if ( pid != 0 )
    {
        close(port_fd);
        return pid;
    }
    port_out(0x61, (port_in(0x61) & ~0x02) | 0x01);
    port_out(0x43, 0xb4);      /* channel 2, low then high byte, mode 2 */
    port_out(0x42, 0);
    port_out(0x42, 0);
    prev = pit2_count();
    start = last = ns(CLOCK_BOOTTIME);
    next_report = start;
    end = start + seconds * 1000000000LL;
    while ( last < end )
    {
        int64_t now, expected;
        long long delta;

        sleep_ms(2);
        count = pit2_count();
        now = ns(CLOCK_BOOTTIME);
        delta = (long long)((prev - count) & (PIT_WRAP - 1));
        expected = (now - last) * PIT_HZ / 1000000000LL;
        while ( expected - delta > PIT_WRAP / 2 )
            delta += PIT_WRAP;
        ticks += delta;
        prev = count;
        last = now;
        if ( now >= next_report )
        {
            int64_t mono = ns(CLOCK_MONOTONIC);
            uint64_t tsc = rdtsc();

            printf("I %lld %lld %lld %llu\n", (long long)now, ticks, (long long)mono,
                   (unsigned long long)tsc);
            next_report = now + 100000000LL;
        }
    }
    _exit(0);
}

static void pin(int cpu)
{
    cpu_set_t set;

    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if ( sched_setaffinity(0, sizeof(set), &set) )
        perror("sched_setaffinity");
}

/* The words all vCPUs' processes share. */
enum { LARGEST_READ, SAMPLING_DONE, SHARED_WORDS };

/* Read CLOCK_MONOTONIC against the largest value any vCPU has read. */
static int check_shared(volatile int64_t *shared)
{
    int64_t seen = shared[LARGEST_READ];
    int64_t now = ns(CLOCK_MONOTONIC);

    if ( now < seen )
        return 1;
    while ( now > seen &&
            !__atomic_compare_exchange_n(&shared[LARGEST_READ], &seen, now, 0,
                                         __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST) )
        continue;
    return 0;
}

static void run_timers(long timer_ms, int cpu)
{
    timed("nanosleep", timer_ms, cpu);
    timed("timerfd", timer_ms, cpu);
    timed("select", timer_ms, cpu);
    timed("poll", timer_ms, cpu);
}

/*
 * A further vCPU: monotonicity against the others, then its timers.  It
 * samples for as long as vCPU 0 does, not for SAMPLE_SECONDS of its own:
 * the guest runs on while Dom0 saves or migrates it, so the segments Dom0
 * times after a checkpoint end later in guest time than planned, and a
 * vCPU that stopped by its own clock missed the last one.  Twice the
 * seconds bound the loop should vCPU 0 never get there.
 */
static void secondary(int cpu, long seconds, long timer_ms,
                      volatile int64_t *shared)
{
    int64_t end, next_sample, now;
    long reads = 0, backwards = 0;

    pin(cpu);
    next_sample = ns(CLOCK_MONOTONIC);
    end = next_sample + 2 * seconds * 1000000000LL;
    while ( (now = ns(CLOCK_MONOTONIC)) < end &&
            !__atomic_load_n(&shared[SAMPLING_DONE], __ATOMIC_SEQ_CST) )
    {
        int i;

        /* This vCPU's own clock, for its rate after each TDF change. */
        if ( now >= next_sample )
        {
            printf("V %d %lld %lld\n", cpu, (long long)now,
                   (long long)ns(CLOCK_REALTIME));
            next_sample = now + 100000000LL;
        }
        for ( i = 0; i < 100; i++, reads++ )
            backwards += check_shared(shared);
        sleep_ms(1);
    }
    printf("M %d %ld %ld\n", cpu, reads, backwards);
    fflush(stdout);
    run_timers(timer_ms, cpu);
    exit(0);
}

static int gap(long virtual_ms)
{
    int64_t start = ns(CLOCK_MONOTONIC), prev = start, now, largest = 0;
    int64_t at_longest = 0;
    uint64_t tsc_prev = rdtsc(), tsc, longest = 0;
    long reads = 0;

    printf("GAPSTART\n");
    fflush(stdout);
    do {
        now = ns(CLOCK_MONOTONIC);
        tsc = rdtsc();
        if ( now - prev > largest )
            largest = now - prev;
        /* With a native TSC, the step that took longest in real time. */
        if ( tsc - tsc_prev > longest )
        {
            longest = tsc - tsc_prev;
            at_longest = now - prev;
        }
        prev = now;
        tsc_prev = tsc;
        reads++;
    } while ( now - start < virtual_ms * 1000000LL );
    printf("GAP %lld %ld %lld %llu\n", (long long)largest, reads,
           (long long)at_longest, (unsigned long long)longest);
    printf("DONE\n");
    return 0;
}

static int bench(long iterations)
{
    int64_t t0, t1, t2;
    volatile uint64_t sink = 0;
    long i;

    report_cpuid();
    t0 = ns(CLOCK_MONOTONIC);
    for ( i = 0; i < iterations; i++ )
        sink += (uint64_t)ns(CLOCK_MONOTONIC);
    t1 = ns(CLOCK_MONOTONIC);
    for ( i = 0; i < iterations; i++ )
        sink += rdtsc();
    t2 = ns(CLOCK_MONOTONIC);
    printf("B %.1f %.1f\n", (double)(t1 - t0) / iterations,
           (double)(t2 - t1) / iterations);
    printf("DONE\n");
    return (int)(sink & 0);
}

int main(int argc, char **argv)
{
    long args[5] = { 5, 500, 1, 0, 0 };
    pid_t pending = 0, platform[2];
    char *p;
    int i, n = 0, cpus;
    volatile int64_t *shared;
    int64_t st[MAX_CPUS];
    pid_t children[MAX_CPUS];

    setvbuf(stdout, NULL, _IOLBF, 0);
    if ( argc > 2 && !strcmp(argv[1], "gap") )
        return gap(atol(argv[2]));
    if ( argc > 2 && !strcmp(argv[1], "bench") )
        return bench(atol(argv[2]));
    for ( i = 1; i < argc && n < 5; i++ )
        for ( p = strtok(argv[i], ","); p && n < 5; p = strtok(NULL, ",") )
            args[n++] = atol(p);
    cpus = args[2] < 1 ? 1 : args[2] > MAX_CPUS ? MAX_CPUS : (int)args[2];

    shared = mmap(NULL, SHARED_WORDS * sizeof(*shared), PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if ( shared == MAP_FAILED )
        return 1;
    shared[LARGEST_READ] = 0;
    shared[SAMPLING_DONE] = 0;

    printf("READY\n");
    report_cpuid();
    report_clock_devices();
    platform[0] = rtc_updates(args[0]);
    platform[1] = pit_ticks(args[0]);
    arm_watchdog((int)args[3]);
    for ( i = 1; i < cpus; i++ )
    {
        children[i] = fork();
        if ( children[i] == 0 )
            secondary(i, args[0], args[1], shared);
    }
    if ( args[4] > 0 )
        pending = pending_timer(args[4]);
    pin(0);
    for ( i = 0; i <= args[0] * 10; i++ )
    {
        int k, ncpu;
        int64_t mono = ns(CLOCK_MONOTONIC);

        check_shared(shared);
        printf("S %lld %lld %lld %llu\n", (long long)mono,
               (long long)ns(CLOCK_REALTIME), (long long)tod_ns(),
               (unsigned long long)rdtsc());
        ncpu = steal(st);
        printf("P %lld", (long long)mono);
        for ( k = 0; k < ncpu; k++ )
            printf(" %lld", (long long)st[k]);
        printf("\n");
        ping(0);
        if ( i < args[0] * 10 )
            sleep_ms(100);
    }
    __atomic_store_n(&shared[SAMPLING_DONE], 1, __ATOMIC_SEQ_CST);
    run_timers(args[1], 0);
    for ( i = 1; i < cpus; i++ )
    {
        while ( waitpid(children[i], NULL, WNOHANG) == 0 )
        {
            ping(0);
            sleep_ms(100);
        }
    }
    while ( pending > 0 && waitpid(pending, NULL, WNOHANG) == 0 )
    {
        ping(0);
        sleep_ms(100);
    }
    for ( i = 0; i < 2; i++ )
    {
        while ( platform[i] > 0 && waitpid(platform[i], NULL, WNOHANG) == 0 )
        {
            ping(0);
            sleep_ms(100);
        }
    }
    disarm_watchdog();
    report_clock_devices();
    printf("DONE\n");
    return 0;
}

/*
 * clockcheck: runs inside a guest and reports its clocks and timers on the
 * console, so that Dom0 can timestamp each line on arrival in real time and
 * compare the guest's view with its own (see selena/lab/check_clock.py).
 *
 *   clockcheck [SAMPLE_SECONDS [TIMER_MS]]
 *
 * Output lines (times in guest nanoseconds):
 *   S <monotonic> <realtime> <gettimeofday>   every 100 ms for SAMPLE_SECONDS
 *   T0 <kind> <monotonic>                      before a TIMER_MS timeout
 *   T1 <kind> <monotonic>                      after it
 *   DONE
 * kinds: nanosleep, timerfd, select, poll.
 */
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/select.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

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

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

    while ( nanosleep(&ts, &ts) )
        continue;
}

static void timed(const char *kind, long ms)
{
    struct timespec tfs = { 0 };
    struct itimerspec its = { 0 };
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    uint64_t expirations;
    int fd;

    printf("T0 %s %lld\n", kind, (long long)ns(CLOCK_MONOTONIC));
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
    (void)tfs;
    printf("T1 %s %lld\n", kind, (long long)ns(CLOCK_MONOTONIC));
    fflush(stdout);
}

int main(int argc, char **argv)
{
    long seconds = argc > 1 ? atol(argv[1]) : 5;
    long timer_ms = argc > 2 ? atol(argv[2]) : 500;
    long i;

    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("READY\n");
    for ( i = 0; i <= seconds * 10; i++ )
    {
        printf("S %lld %lld %lld\n", (long long)ns(CLOCK_MONOTONIC),
               (long long)ns(CLOCK_REALTIME), (long long)tod_ns());
        if ( i < seconds * 10 )
            sleep_ms(100);
    }
    timed("nanosleep", timer_ms);
    timed("timerfd", timer_ms);
    timed("select", timer_ms);
    timed("poll", timer_ms);
    printf("DONE\n");
    return 0;
}

/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * hvm-launch: start a full HVM domain without a device model (Xen alone
 * emulates its PIT, RTC, HPET, ACPI PM timer, 8259s, IO-APIC and LAPIC;
 * other I/O reads as all ones), from a 32-bit ELF with a PHYS32 entry note
 * (tests/hvmguest), built with libxenguest as libxl builds a PVH guest, and
 * print what it writes on its PV console ring.  A lab test (selena.lab.
 * check_hv hvm): the lab's Dom0 has no qemu-system-xen for xl's HVM guests.
 *
 *   hvm-launch [--viridian] KERNEL [MEMORY_MB [TIMEOUT_S]]
 *
 * --viridian gives the domain Hyper-V enlightenments (their base set), which
 * the time dilation series refuses to dilate (their timers are real-time).
 * The domain (1 vCPU, MEMORY_MB, default 32, shadow paging, the TSC always
 * emulated) is left paused: hvm-launch prints "domid N" and waits for the
 * caller to set its time dilation factor and unpause it (xl unpause N).
 * Each line of the guest's console is printed as "<CLOCK_MONOTONIC s> <line>",
 * stamped when seen (the ring is polled every POLL_US).  When the domain
 * shuts down, TIMEOUT_S (default 600) after the start, on SIGTERM, SIGINT or
 * SIGHUP, or when the parent dies, hvm-launch prints "end REASON" and
 * destroys the domain.  Exit 0 if the guest powered off, 1 otherwise, 2 on
 * bad usage or when the domain could not be built.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <xenctrl.h>
#include <xenforeignmemory.h>
#include <xenguest.h>
#include <xen/hvm/e820.h>
#include <xen/hvm/params.h>
#include <xen/io/console.h>

#define POLL_US                  1000
#define TSC_MODE_ALWAYS_EMULATE  1     /* xc_domain_set_tsc_info(): libxl's 1 */
#define TIMER_MODE_NO_DELAY      1     /* HVM_PARAM_TIMER_MODE: libxl's default */
#define SHADOW_POOL_MB           8     /* libxl would give 1.25 for 32 MB, 1 vCPU */
#define LINE_MAX_LEN             256

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    stop_signal = sig;
}

static int parse_uint(const char *s, unsigned int *v)
{
    char *end;
    unsigned long n;

    errno = 0;
    n = strtoul(s, &end, 10);
    if ( errno || end == s || *end || !n || n > 65536 )
        return -1;
    *v = n;
    return 0;
}

/* The guest's memory, image, start info and first vCPU, as libxl__build_hvm. */
static int build(xc_interface *xch, uint32_t domid, const char *kernel,
                 unsigned int mem_mb, xen_pfn_t *console_pfn)
{
    struct xc_dom_image *dom = xc_dom_allocate(xch, NULL, NULL);
    const char *step = "xc_dom_allocate";
    int rc = -1;

    if ( !dom )
        goto out;
    dom->container_type = XC_DOM_HVM_CONTAINER;
    dom->target_pages = (xen_pfn_t)mem_mb << (20 - XC_PAGE_SHIFT);
    /* All of its RAM below the MMIO hole (LAPIC, HPET, special pages). */
    dom->mmio_size = HVM_BELOW_4G_MMIO_LENGTH;
    dom->mmio_start = (1ull << 32) - dom->mmio_size;
    dom->lowmem_end = (uint64_t)mem_mb << 20;
    dom->highmem_end = 0;
    dom->vga_hole_size = 0;
    /* No device model: no hvmloader, no ioreq pages; a PVH-style start. */
    dom->device_model = false;
    dom->max_vcpus = 1;

    if ( (step = "xc_dom_kernel_file", xc_dom_kernel_file(dom, kernel)) ||
         (step = "xc_dom_boot_xen_init", xc_dom_boot_xen_init(dom, xch, domid)) ||
         (step = "xc_dom_parse_image", xc_dom_parse_image(dom)) ||
         (step = "xc_dom_mem_init", xc_dom_mem_init(dom, mem_mb)) ||
         (step = "xc_dom_boot_mem_init", xc_dom_boot_mem_init(dom)) ||
         (step = "xc_dom_build_image", xc_dom_build_image(dom)) ||
         (step = "xc_dom_boot_image", xc_dom_boot_image(dom)) ||
         (step = "xc_dom_gnttab_init", xc_dom_gnttab_init(dom)) )
        goto out;
    *console_pfn = dom->console_pfn;
    rc = 0;

 out:
    if ( rc )
        fprintf(stderr, "hvm-launch: %s failed: %s\n", step, strerror(errno));
    if ( dom )
        xc_dom_release(dom);
    return rc;
}

/* The domain, paused, with its settings; *domid 0 unless it was created. */
static int create(xc_interface *xch, uint32_t *domid, unsigned int mem_mb,
                  int viridian)
{
    struct xen_domctl_createdomain config = {
        /* Shadow paging: the lab's Xen (under QEMU) has no HAP. */
        .flags = XEN_DOMCTL_CDF_hvm,
        .max_vcpus = 1,
        .max_evtchn_port = 1023,
        .max_grant_frames = 32,
        .max_maptrack_frames = 128,
        .grant_opts = XEN_DOMCTL_GRANT_version(1),
        /* What emulation_flags_ok() takes for an HVM guest with its timers. */
        .arch.emulation_flags = XEN_X86_EMU_ALL & ~XEN_X86_EMU_VPCI,
    };
    const char *step;

    *domid = 0;                         /* any free domid */
    if ( xc_domain_create(xch, domid, &config) )
    {
        fprintf(stderr, "hvm-launch: xc_domain_create failed: %s\n",
                strerror(errno));
        *domid = 0;
        return -1;
    }
    /*
     * The vCPUs themselves, as libxl__build_pre: createdomain only sizes
     * their array, and Xen 4.17's hvm_save() (the builder's getcontext)
     * dereferences vCPU 0 without checking it exists.
     */
    if ( (step = "xc_domain_max_vcpus", xc_domain_max_vcpus(xch, *domid, 1)) ||
         (step = "xc_domain_setmaxmem",
          xc_domain_setmaxmem(xch, *domid, (mem_mb + 1) * 1024)) ||
         (step = "xc_set_paging_mempool_size",
          xc_set_paging_mempool_size(xch, *domid, SHADOW_POOL_MB << 20)) ||
         (step = "HVM_PARAM_HPET_ENABLED",
          xc_hvm_param_set(xch, *domid, HVM_PARAM_HPET_ENABLED, 1)) ||
         (step = "HVM_PARAM_TIMER_MODE",
          xc_hvm_param_set(xch, *domid, HVM_PARAM_TIMER_MODE,
                           TIMER_MODE_NO_DELAY)) ||
         (step = "HVM_PARAM_VPT_ALIGN",
          xc_hvm_param_set(xch, *domid, HVM_PARAM_VPT_ALIGN, 1)) ||
         (step = "HVM_PARAM_VIRIDIAN",
          viridian ? xc_hvm_param_set(xch, *domid, HVM_PARAM_VIRIDIAN,
                                      HVMPV_base_freq) : 0) ||
         /* A dilated HVM container must not read the hardware TSC. */
         (step = "xc_domain_set_tsc_info",
          xc_domain_set_tsc_info(xch, *domid, TSC_MODE_ALWAYS_EMULATE,
                                 0, 0, 0)) )
    {
        fprintf(stderr, "hvm-launch: %s failed: %s\n", step, strerror(errno));
        return -1;
    }
    return 0;
}

/* New console output, line by line, each stamped with `now`. */
static void drain(volatile struct xencons_interface *intf, char *line,
                  size_t *len, const struct timespec *now)
{
    XENCONS_RING_IDX cons = intf->out_cons, prod = intf->out_prod;

    __sync_synchronize();               /* the bytes after the index */
    for ( ; cons != prod; cons++ )
    {
        char c = intf->out[MASK_XENCONS_IDX(cons, intf->out)];

        if ( c == '\n' )
        {
            printf("%lld.%09ld %.*s\n", (long long)now->tv_sec, now->tv_nsec,
                   (int)*len, line);
            *len = 0;
        }
        else if ( *len < LINE_MAX_LEN )
            line[(*len)++] = c;
    }
    __sync_synchronize();               /* read before the guest reuses them */
    intf->out_cons = cons;
    fflush(stdout);
}

/* NULL while the domain runs (or is paused), else why it ended. */
static const char *ended(xc_interface *xch, uint32_t domid)
{
    xc_dominfo_t info;

    if ( xc_domain_getinfo(xch, domid, 1, &info) != 1 || info.domid != domid )
        return "gone";
    if ( info.dying )
        return "dying";
    if ( !info.shutdown )
        return NULL;
    switch ( info.shutdown_reason )
    {
    case SHUTDOWN_poweroff: return "poweroff";
    case SHUTDOWN_reboot:   return "reboot";
    case SHUTDOWN_suspend:  return "suspend";
    case SHUTDOWN_crash:    return "crash";
    case SHUTDOWN_watchdog: return "watchdog";
    default:                return "shutdown";
    }
}

int main(int argc, char **argv)
{
    unsigned int mem_mb = 32, timeout_s = 600;
    xc_interface *xch;
    xenforeignmemory_handle *fmem;
    volatile struct xencons_interface *intf = NULL;
    xen_pfn_t console_pfn = 0;
    uint32_t domid;
    struct timespec start, now;
    const char *why = NULL;
    char line[LINE_MAX_LEN];
    size_t len = 0;
    unsigned int polls = 0;
    int err = 0, viridian = argc > 1 && !strcmp(argv[1], "--viridian");

    argc -= viridian;
    argv += viridian;
    if ( argc < 2 || argc > 4 ||
         (argc > 2 && parse_uint(argv[2], &mem_mb)) ||
         (argc > 3 && parse_uint(argv[3], &timeout_s)) )
    {
        fprintf(stderr, "usage: hvm-launch [--viridian] KERNEL "
                "[MEMORY_MB [TIMEOUT_S]]\n");
        return 2;
    }
    /* Never outlive the caller with a domain left behind. */
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    signal(SIGHUP, on_signal);
    prctl(PR_SET_PDEATHSIG, SIGTERM);

    xch = xc_interface_open(NULL, NULL, 0);
    fmem = xenforeignmemory_open(NULL, 0);
    if ( !xch || !fmem )
    {
        fprintf(stderr, "hvm-launch: cannot open libxenctrl (root in Dom0?)\n");
        return 2;
    }
    if ( create(xch, &domid, mem_mb, viridian) )
    {
        if ( domid )
            xc_domain_destroy(xch, domid);
        return 2;
    }
    if ( build(xch, domid, argv[1], mem_mb, &console_pfn) ||
         !(intf = xenforeignmemory_map(fmem, domid, PROT_READ | PROT_WRITE,
                                       1, &console_pfn, &err)) || err )
    {
        if ( !intf || err )
            fprintf(stderr, "hvm-launch: cannot map the console page %#"
                    PRIx64 ": %s\n", (uint64_t)console_pfn,
                    strerror(err ? err : errno));
        xc_domain_destroy(xch, domid);
        return 2;
    }

    printf("domid %u\n", domid);
    fflush(stdout);
    clock_gettime(CLOCK_MONOTONIC, &start);
    for ( ; ; )
    {
        clock_gettime(CLOCK_MONOTONIC, &now);
        drain(intf, line, &len, &now);
        /* The domain's state every 10 polls: once it ended, drain again. */
        if ( ++polls % 10 == 0 && (why = ended(xch, domid)) )
        {
            clock_gettime(CLOCK_MONOTONIC, &now);
            drain(intf, line, &len, &now);
            break;
        }
        if ( stop_signal )
        {
            why = "signal";
            break;
        }
        if ( now.tv_sec - start.tv_sec >= (time_t)timeout_s )
        {
            why = "timeout";
            break;
        }
        usleep(POLL_US);
    }

    printf("end %s\n", why);
    fflush(stdout);
    xenforeignmemory_unmap(fmem, (void *)intf, 1);
    xc_domain_destroy(xch, domid);
    xenforeignmemory_close(fmem);
    xc_interface_close(xch);
    return strcmp(why, "poweroff") ? 1 : 0;
}

/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * tdf-restore: write the save/restore pseudo MSRs of the time dilation
 * series to vCPU 0 of a domain, exactly as libxc's restore does
 * (XEN_DOMCTL_set_vcpu_msrs with an X86_PV_VCPU_MSRS record's entries).
 * A lab test (selena.lab.check_hv restore): the hypervisor must accept them
 * only for a domain that has never run, and refuse them for a running one.
 *
 *   tdf-restore DOMID MILLI VIRT_NS [WALL_NS]
 *
 * Without WALL_NS only the first two are written (the hypervisor must
 * refuse a dilation that does not come whole).
 * Prints "ok" or "errno N NAME" (the domctl's error) and exits 0 either
 * way; 2 on bad usage or when libxenctrl cannot be opened.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xenctrl.h>

/* Must match xen/include/public/domctl.h as patched. */
#define XEN_SELENA_TDF_MSR_FACTOR 0x5e1e0000U
#define XEN_SELENA_TDF_MSR_VIRT   0x5e1e0001U
#define XEN_SELENA_TDF_MSR_WALL   0x5e1e0002U

static int parse_u64(const char *s, unsigned long long *v)
{
    char *end;

    errno = 0;
    *v = strtoull(s, &end, 10);
    return errno || end == s || *end ? -1 : 0;
}

int main(int argc, char **argv)
{
    DECLARE_HYPERCALL_BUFFER(xen_domctl_vcpu_msr_t, msrs);
    struct xen_domctl domctl;
    unsigned long long domid, milli, virt, wall = 0;
    unsigned int count = argc == 5 ? 3 : 2;
    xc_interface *xch;
    int rc, err;

    if ( argc < 4 || argc > 5 || parse_u64(argv[1], &domid) ||
         domid >= DOMID_FIRST_RESERVED || parse_u64(argv[2], &milli) ||
         parse_u64(argv[3], &virt) || (argc == 5 && parse_u64(argv[4], &wall)) )
    {
        fprintf(stderr, "usage: tdf-restore DOMID MILLI VIRT_NS [WALL_NS]\n");
        return 2;
    }
    xch = xc_interface_open(NULL, NULL, 0);
    if ( !xch )
    {
        fprintf(stderr, "tdf-restore: cannot open libxenctrl (root in Dom0?)\n");
        return 2;
    }
    /* Hypercall-safe memory, as libxc's restore uses. */
    msrs = xc_hypercall_buffer_alloc(xch, msrs, 3 * sizeof(*msrs));
    if ( !msrs )
    {
        fprintf(stderr, "tdf-restore: out of memory\n");
        xc_interface_close(xch);
        return 2;
    }
    memset(msrs, 0, 3 * sizeof(*msrs));
    msrs[0].index = XEN_SELENA_TDF_MSR_FACTOR;
    msrs[0].value = milli;
    msrs[1].index = XEN_SELENA_TDF_MSR_VIRT;
    msrs[1].value = virt;
    msrs[2].index = XEN_SELENA_TDF_MSR_WALL;
    msrs[2].value = wall;

    memset(&domctl, 0, sizeof(domctl));
    domctl.cmd = XEN_DOMCTL_set_vcpu_msrs;
    domctl.interface_version = XEN_DOMCTL_INTERFACE_VERSION;
    domctl.domain = domid;
    domctl.u.vcpu_msrs.vcpu = 0;
    domctl.u.vcpu_msrs.msr_count = count;
    set_xen_guest_handle(domctl.u.vcpu_msrs.msrs, msrs);

    rc = xc_domctl(xch, &domctl);
    err = errno;
    xc_hypercall_buffer_free(xch, msrs);
    xc_interface_close(xch);

    if ( rc < 0 )
        printf("errno %d %s\n", err,
               err == EBUSY ? "EBUSY" : err == EPERM ? "EPERM" :
               err == EACCES ? "EACCES" : err == EINVAL ? "EINVAL" :
               err == ESRCH ? "ESRCH" : "other");
    else
        printf("ok\n");
    return 0;
}

/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The hypervisor's muldiv64() (xen/lib/muldiv64.c) for the arithmetic
 * header in user space: exact whenever the quotient fits in 64 bits, which
 * the header checks before calling it.  Included by one file per test.
 */
#include <stdint.h>

uint64_t muldiv64(uint64_t a, uint32_t b, uint32_t c)
{
    return (uint64_t)((unsigned __int128)a * b / c);
}

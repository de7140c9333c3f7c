#ifndef SELENA_NETCONF_H
#define SELENA_NETCONF_H

#include <stddef.h>

/*
 * Apply the network directives in `text` (the value of the control key
 * `net`: one directive a line, PROTOCOL.md), in order, stopping at the first
 * that fails. `result` gets what the agent reports on agent/net: "ok", or
 * "failed <index> <escaped detail>". Returns 0, or -1 on a failure.
 */
int netconf_apply(const char *text, char *result, size_t result_len);

#endif /* SELENA_NETCONF_H */

#ifndef SELENA_XSTOOL_H
#define SELENA_XSTOOL_H

#include "xs.h"

/*
 * `selena-agent xs read|write|rm|ls PATH [VALUE]`: a Xenstore client for
 * tests inside guests (permission checks); prints the error name on failure.
 * `selena-agent xs echo PING PONG COUNT`: see xs_echo in xstool.c. `xs` is
 * open; argv holds at least two words (the verb and a path). Returns the
 * process's exit status.
 */
int xs_tool(struct xs_conn *xs, int argc, char **argv);

#endif /* SELENA_XSTOOL_H */

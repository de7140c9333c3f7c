/* libFuzzer target: the agent's parsers must never crash or leak on any
 * bytes Dom0 (or a corrupted store) could hand them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct spec s;
    struct net_directive d;
    const char *reason;
    char detail[128], esc[256];
    char *plain;

    if ( spec_parse((const char *)data, size, &s, &reason, detail,
                    sizeof(detail)) == 0 )
    {
        /* An accepted spec is always runnable: a program or a shell. */
        if ( !(s.argc ? s.argv[0][0] != '\0' : s.shell != NULL) )
            abort();
        spec_free(&s);
    }
    net_parse_line((const char *)data, size, &d, detail, sizeof(detail));
    plain = unescape((const char *)data, size);
    if ( plain )
    {
        char *again;

        /* escape/unescape round trip on whatever unescaped cleanly. */
        escape(plain, esc, sizeof(esc));
        if ( strlen(plain) * 3 < sizeof(esc) )
        {
            again = unescape(esc, strlen(esc));
            if ( !again || strcmp(again, plain) != 0 )
                abort();
            free(again);
        }
        free(plain);
    }
    return 0;
}

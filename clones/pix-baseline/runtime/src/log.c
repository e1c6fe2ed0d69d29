#define _GNU_SOURCE
/* log.c - one-line messages on stderr, prefixed with the clone's name so a user running several
 * clones can tell them apart. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "ditto_internal.h"

static const char *log_name = "ditto-clone";

void ditto_log_init(const char *clone_name)
{
    if (clone_name != NULL && clone_name[0] != '\0')
        log_name = clone_name;
}

static void vlog(const char *fmt, va_list ap)
{
    /* One fprintf per line: stderr is unbuffered, and one call keeps lines from different
     * threads or processes from interleaving mid-line in practice. */
    char line[1024];
    vsnprintf(line, sizeof line, fmt, ap);
    fprintf(stderr, "%s: %s\n", log_name, line);
}

void ditto_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(fmt, ap);
    va_end(ap);
}

_Noreturn void ditto_die(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(fmt, ap);
    va_end(ap);
    exit(code);
}

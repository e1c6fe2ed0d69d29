#define _GNU_SOURCE
/* cli.c - the clone's command line. Every clone takes the same flags, so scripts can drive any
 * clone without knowing what it cloned. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ditto_internal.h"

static void usage(FILE *out, const char *prog, const struct ditto_config *cfg)
{
    fprintf(out,
            "usage: %s [--port N] [--bind IPV4] [--threads N] [--data-dir DIR]\n"
            "\n"
            "A ditto clone of '%s': a synthetic server with the original's thread and network\n"
            "model, syscalls and request behaviour. Stop it with Ctrl-C or SIGTERM.\n"
            "\n"
            "  --port N       TCP port to listen on (default %u; 0 picks a free one)\n"
            "  --bind IPV4    address to listen on (default 127.0.0.1)\n"
            "  --threads N    worker threads (epoll dispatch) or worker processes (prefork);\n"
            "                 the other models ignore it (default from the profile)\n"
            "  --data-dir DIR where the clone's data files go (default: a fresh directory\n"
            "                 under /tmp, removed at exit)\n"
            "  --help         this text\n"
            "\n"
            "Example: %s --port 11311 & ditto load --target <spec> --addr 127.0.0.1:11311\n",
            prog, cfg->clone_name ? cfg->clone_name : "?", (unsigned)cfg->default_port, prog);
}

/* Parses a decimal in [lo, hi]; 0 on success. */
static int parse_u32(const char *s, unsigned long lo, unsigned long hi, uint32_t *out)
{
    if (s == NULL || *s == '\0' || *s == '-' || *s == '+')
        return -1;
    errno = 0;
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

__attribute__((format(printf, 2, 3))) static int bad(const char *prog, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* One write: the message is one line even if something else shares stderr. */
    fprintf(stderr, "%s: %s (see --help)\n", prog, msg);
    return 2;
}

int ditto_cli_parse(int argc, char **argv, const struct ditto_config *cfg, struct ditto_opts *out)
{
    const char *prog = argc > 0 && argv[0] != NULL ? argv[0] : "clone";
    memset(out, 0, sizeof *out);
    out->port = cfg->default_port;
    snprintf(out->bind, sizeof out->bind, "127.0.0.1");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        /* Accept both "--flag value" and "--flag=value". */
        char name[32];
        const char *eq = strchr(a, '=');
        if (strncmp(a, "--", 2) == 0 && eq != NULL && (size_t)(eq - a) < sizeof name) {
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = '\0';
            val = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a);
        }
        if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
            usage(stdout, prog, cfg);
            return 1;
        }
        int takes_value = strcmp(name, "--port") == 0 || strcmp(name, "--threads") == 0 ||
                          strcmp(name, "--data-dir") == 0 || strcmp(name, "--bind") == 0;
        if (!takes_value)
            return bad(prog, "unknown flag '%s'", a);
        if (val == NULL) {
            if (i + 1 >= argc)
                return bad(prog, "%s needs a value", name);
            val = argv[++i];
        }
        if (strcmp(name, "--port") == 0) {
            uint32_t p;
            if (parse_u32(val, 0, 65535, &p) != 0)
                return bad(prog, "--port must be a number from 0 to 65535, got '%s'", val);
            out->port = (uint16_t)p;
        } else if (strcmp(name, "--threads") == 0) {
            if (parse_u32(val, 1, 1024, &out->threads) != 0)
                return bad(prog, "--threads must be a number from 1 to 1024, got '%s'", val);
        } else if (strcmp(name, "--data-dir") == 0) {
            if (val[0] == '\0' || strlen(val) > 3000)
                return bad(prog, "--data-dir needs a directory path, got '%s'", val);
            out->data_dir = val;
        } else {
            struct in_addr addr;
            if (strlen(val) >= sizeof out->bind || inet_pton(AF_INET, val, &addr) != 1)
                return bad(prog, "--bind must be an IPv4 address such as 127.0.0.1, got '%s'", val);
            snprintf(out->bind, sizeof out->bind, "%s", val);
        }
    }
    return 0;
}

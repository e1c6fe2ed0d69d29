/* check.h - the runtime's C unit tests' one assertion: CHECK(cond, fmt, ...) reports a failed
 * condition with its place and counts it in `failures`, and the test goes on, so that one run
 * lists every failed check. */
#ifndef DITTO_TEST_CHECK_H
#define DITTO_TEST_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

#endif

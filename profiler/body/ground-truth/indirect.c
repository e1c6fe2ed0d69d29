/*
 * indirect: indirect calls with known target-change rates.
 *
 * usage: indirect [ITERS]      default: ITERS 1048576
 *
 * Each iteration makes three indirect calls through a volatile table of two function pointers, so
 * the compiler cannot devirtualise them (each is a `call *table(...)`: one static site per line).
 * A site's target-change rate is the share of its executions whose target differs from its
 * previous one (what a last-target predictor mispredicts without aliasing).
 *   site  target               change rate        bin (profile/src/body.rs)
 *   F     table[0]             0                  0
 *   A     table[i & 1]         1 (alternates)     10
 *   Q     table[(i >> 2) & 1]  1/4 (runs of 4)    3
 * => 3 * ITERS indirect calls plus the few of libc's start-up and exit (PLT slots, which never
 *    change target): bins 0, 3 and 10 one third each; mean change rate (0 + 1 + 1/4) / 3 = 0.4167.
 * Returns are not indirect branches (a return-stack predictor gets them right; cachegrind does not
 * count them either), so f0 and f1 add none.
 */
#include <stdio.h>
#include <stdlib.h>

static unsigned long acc;

__attribute__((noinline)) static void f0(void) { acc += 1; }
__attribute__((noinline)) static void f1(void) { acc += 3; }

static void (*volatile table[2])(void) = {f0, f1};

int main(int argc, char **argv)
{
    unsigned long iters = argc > 1 ? strtoul(argv[1], NULL, 0) : 1048576;
    for (unsigned long i = 0; i < iters; i++) {
        table[0]();
        table[i & 1]();
        table[(i >> 2) & 1]();
    }
    printf("%lu\n", acc);
    return 0;
}

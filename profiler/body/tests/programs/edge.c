/* Unusual instructions and events, for the ditto-body tool tests (profiler/body/tests/tool.rs):
   atomic read-modify-writes (IR CAS), a Valgrind client request (a 19-byte VEX "instruction"),
   `rep movsb`, and guest memory faults handled by the program.

   Usage: edge ITERATIONS

   Prints "array ADDR 8" (the atomic counter, which gets exactly ITERATIONS locked increments) and
   "faults N". */

#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <valgrind/valgrind.h>

static long counter;
static sigjmp_buf on_fault;
static char src[4096], dst[4096];

static void handler(int sig)
{
    (void)sig;
    siglongjmp(on_fault, 1);
}

int main(int argc, char** argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    printf("array %p %zu\n", (void*)&counter, sizeof counter);
    fflush(stdout);

    for (long i = 0; i < n; i++)
        __atomic_fetch_add(&counter, 1, __ATOMIC_SEQ_CST);

    long on_valgrind = 0;
    for (int i = 0; i < 10; i++)
        on_valgrind += RUNNING_ON_VALGRIND;

    memset(src, 7, sizeof src);
    void* d = dst;
    const void* s = src;
    size_t c = sizeof src;
    __asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(c) : : "memory");

    /* Faults in the middle of superblocks, after some accesses: the stream must stay coherent. */
    signal(SIGSEGV, handler);
    volatile char* hole = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (hole == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    volatile long sink = 0;
    int faults = 0;
    for (int i = 0; i < 50; i++) {
        if (sigsetjmp(on_fault, 1) == 0) {
            sink += dst[i];
            if (i % 5 == 0)
                sink += hole[i];
            sink += dst[i + 1];
        } else {
            faults++;
        }
    }
    printf("faults %d\n", faults);
    printf("valgrind %ld\n", on_valgrind);
    return counter == n && dst[100] == 7 ? 0 : 1;
}

/* A loop with known behaviour, for the ditto-body tool tests (profiler/body/tests/tool.rs).

   Usage: loop ITERATIONS [fork|threads THREADS]

   Each iteration does exactly one load from `data` (index i % 1024) and executes the conditional
   branch at the global label `ditto_branch`, which is taken exactly when the iteration number is
   2 mod 3, so ITERATIONS/3 times when ITERATIONS is a multiple of 3.  The loop is written in
   assembly so that the compiler cannot add, remove or reorder those accesses.

   It prints, before running:
     array ADDR BYTES    where `data` is and its size
     branch ADDR         the address of the conditional branch
   and with `fork` the child's pid ("child PID"), with `threads` each thread's kernel id
   ("thread TID"). */

#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static long data[1024];
extern const char ditto_branch[];

__attribute__((noinline, noclone)) static long run(long n)
{
    long sum = 0, taken = 0;
    __asm__ volatile("   mov $3, %%r8\n"
                     "   xor %%rcx, %%rcx\n"
                     "   test %[n], %[n]\n"
                     "   jz 4f\n"
                     "1: mov %%rcx, %%rax\n"
                     "   and $1023, %%rax\n"
                     "   mov (%[base],%%rax,8), %%rax\n"
                     "   add %%rax, %[sum]\n"
                     "   dec %%r8\n"
                     ".globl ditto_branch\n"
                     "ditto_branch:\n"
                     "   jz 3f\n"
                     "2: inc %%rcx\n"
                     "   cmp %[n], %%rcx\n"
                     "   jb 1b\n"
                     "   jmp 4f\n"
                     "3: mov $3, %%r8\n"
                     "   add $1, %[taken]\n"
                     "   jmp 2b\n"
                     "4:\n"
                     : [sum] "+r"(sum), [taken] "+r"(taken)
                     : [base] "r"(data), [n] "r"(n)
                     : "rax", "rcx", "r8", "cc", "memory");
    if (taken != n / 3) {
        fprintf(stderr, "loop: branch taken %ld times, expected %ld\n", taken, n / 3);
        exit(3);
    }
    return sum;
}

static long iterations;

static void* thread_main(void* arg)
{
    (void)arg;
    printf("thread %ld\n", (long)syscall(SYS_gettid));
    fflush(stdout);
    run(iterations);
    return NULL;
}

int main(int argc, char** argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: loop ITERATIONS [fork|threads THREADS]\n");
        return 2;
    }
    iterations = atol(argv[1]);
    for (int i = 0; i < 1024; i++)
        data[i] = i;
    printf("array %p %zu\n", (void*)data, sizeof data);
    printf("branch %p\n", (const void*)ditto_branch);
    fflush(stdout);

    if (argc >= 3 && strcmp(argv[2], "fork") == 0) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0) {
            run(iterations);
            _exit(0);
        }
        printf("child %ld\n", (long)pid);
        fflush(stdout);
        int status = 0;
        if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "loop: child failed\n");
            return 1;
        }
        return 0;
    }
    if (argc >= 4 && strcmp(argv[2], "threads") == 0) {
        int n = atoi(argv[3]);
        pthread_t t[64];
        if (n < 1 || n > 64) {
            fprintf(stderr, "loop: 1..64 threads\n");
            return 2;
        }
        for (int i = 0; i < n; i++)
            if (pthread_create(&t[i], NULL, thread_main, NULL) != 0) {
                fprintf(stderr, "loop: pthread_create failed\n");
                return 1;
            }
        for (int i = 0; i < n; i++)
            pthread_join(t[i], NULL);
        return 0;
    }
    long sum = run(iterations);
    printf("sum %ld\n", sum);
    return 0;
}

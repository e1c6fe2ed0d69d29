/*
 * shared: two worker threads, each with a private buffer, both touching one shared buffer.
 *
 * usage: shared [S] [ITERS]     S = accesses per 4 that go to the shared buffer, 0..4 (default 1),
 *                               ITERS per thread, default 2500000
 *
 * main() starts two pthreads and joins them; it touches no buffer itself. Each worker runs one
 * inline-asm loop; an iteration makes exactly 4 data accesses, slot k using base register b_k:
 *     load (b0+off) ; load 8(b1+off) ; load 16(b2+off) ; store 24(b3+off)
 *     off = (off + 64) & (16 KiB - 1)
 * Slots 0..S-1 use the shared buffer, slots S..3 the thread's own private buffer. Every buffer is
 * 16 KiB, 4 KiB-aligned, in its own pages (so "shared" holds at line and at page granularity), and is
 * swept completely by each thread (256 lines), so the shared buffer is touched by both threads.
 * Per iteration: 4 data accesses (3 loads, 1 store), 10 instructions, no stack access.
 *
 * Expected:
 *  - shared_data_fraction = S/4 (default 0.25); with S = 4 the store also goes to the shared buffer
 *    (true write sharing). Thread start/exit and libc make < 0.5 % of the data accesses (all private).
 *  - regular_access_fraction ~ 0.99: every static access advances by a constant +64 B, but wraps once
 *    every 256 iterations, which breaks 2 accesses in 256 (the wrap delta, then the first +64 after it):
 *    254/256 = 0.992 of the loop's accesses.
 *  - pointer_chase_fraction 0. Data working set: 32 KiB per thread (16 KiB private + 16 KiB shared)
 *    and 48 KiB over both threads; per-thread hit curve steps at 32 KiB for S in 1..3.
 *  - Instructions: 2 x 10 x ITERS = 50 M at the default.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define BUF 16384

static char *shared_buf;
static int nshared = 1;
static uint64_t iters = 2500000ull;

struct worker {
  char *priv;
  uint64_t sum;
};

static void *work(void *arg) {
  struct worker *w = arg;
  char *b[4];
  for (int k = 0; k < 4; k++) b[k] = k < nshared ? shared_buf : w->priv;
  uint64_t n = iters, off = 0, acc = 0, t;
  __asm__ volatile(".p2align 6\n1:\n\t"
                   "mov (%[b0],%[off]), %[t]\n\t"
                   "add %[t], %[acc]\n\t"
                   "mov 8(%[b1],%[off]), %[t]\n\t"
                   "add %[t], %[acc]\n\t"
                   "add 16(%[b2],%[off]), %[acc]\n\t"
                   "mov %[acc], 24(%[b3],%[off])\n\t"
                   "add $64, %[off]\n\t"
                   "and $16383, %[off]\n\t"
                   "sub $1, %[n]\n\t"
                   "jne 1b\n\t"
                   : [n] "+r"(n), [off] "+r"(off), [acc] "+r"(acc), [t] "=&r"(t)
                   : [b0] "r"(b[0]), [b1] "r"(b[1]), [b2] "r"(b[2]), [b3] "r"(b[3])
                   : "cc", "memory");
  w->sum = acc;
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1) nshared = atoi(argv[1]);
  if (argc > 2) iters = strtoull(argv[2], 0, 0);
  if (nshared < 0 || nshared > 4 || iters == 0) {
    fprintf(stderr, "usage: %s [0..4] [ITERS]\n", argv[0]);
    return 2;
  }
  shared_buf = aligned_alloc(4096, BUF);
  struct worker w[2];
  pthread_t tid[2];
  for (int i = 0; i < 2; i++) {
    w[i].priv = aligned_alloc(4096, BUF);
    if (!shared_buf || !w[i].priv) return 1;
  }
  /* main never touches the buffers (initialising them here would make main a sharer): the loads read
     them as allocated, which is harmless, and the store slot writes them. */
  for (int i = 0; i < 2; i++) pthread_create(&tid[i], 0, work, &w[i]);
  for (int i = 0; i < 2; i++) pthread_join(tid[i], 0);
  printf("shared S=%d/4 iters=%llu per thread sums=%llu,%llu\n", nshared, (unsigned long long)iters,
         (unsigned long long)w[0].sum, (unsigned long long)w[1].sum);
  return 0;
}

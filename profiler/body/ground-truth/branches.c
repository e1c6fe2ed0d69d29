/*
 * branches: static conditional branches with known taken and transition rates.
 *
 * usage: branches [mid|classic|next] [ITERS]     default: mid, ITERS 1048576 (keep it a multiple of 256)
 *
 * The whole loop is one inline-asm block, so every conditional jump below is a real jcc (no cmov, no
 * if-conversion) and nothing else in the loop branches. Each pattern branch is
 *     movabs $MASK,%t ; bt %idx,%t ; jc 2f ; add $1,%acc ; 2:
 * taken iff bit (idx mod 64) of MASK is set, idx = i >> SHIFT (i = iteration). "taken rate" below is the
 * rarer direction's share min(p, 1-p); "transition rate" is the share of executions whose direction
 * differs from the previous execution of the same branch. Bins (profile/src/body.rs): bin k holds
 * (2^-(k+2), 2^-(k+1)] for k = 0..9, bin 10 holds the rest (<= 2^-11, including 0).
 *
 * mode mid (default): every rate lies well inside a bin (no rate on a bin edge).
 *   branch  pattern                               taken            transition
 *   M1      11 runs of 2 per 64 (mask 60c30c..)   22/64 = .34375 b0   22/64 = .34375 b0
 *   M2      6 runs of 2 per 64                    12/64 = .1875  b1   12/64 = .1875  b1
 *   M3      3 runs of 2 per 64                     6/64 = .09375 b2    6/64 = .09375 b2
 *   M4      3 runs (11,11,10 bits), idx = i>>1    32/64 = .5     b0    6/128= .046875 b3
 *   M5      3 single bits per 64                   3/64 = .046875 b3   6/64 = .09375 b2
 *   M6      3 runs (8,7,7 bits), idx = i>>2       22/64 = .34375 b0    6/256= .0234  b4
 *   R1      LCG top 7 bits < 3                    ~3/128 = .0234 b4  ~2p(1-p)= .0458 b3
 *   R2      LCG bits 40..49 < 3                  ~3/1024= .00293 b7  ~2p(1-p)= .00584 b6
 *   N0      never taken (bit 63 of i)              0             b10   0             b10
 *   loop    taken ITERS-1 of ITERS                 1/ITERS       b10   1/ITERS       b10
 *   => 10 static branches, each 1/10 of the executions:
 *   taken histogram      b0 .3, b1 .1, b2 .1, b3 .1, b4 .1, b7 .1, b10 .2
 *   transition histogram b0 .1, b1 .1, b2 .2, b3 .2, b4 .1, b6 .1, b10 .2
 *
 * mode classic (the textbook patterns; several rates sit exactly on a bin edge, counted with the
 * (lo, hi] rule; a profiler whose first execution is not a transition sees transition counts 1 lower,
 * which keeps every one of them in the same bin):
 *   C1  alternate (i&1)           taken .5 b0    transition 1.0 (ABOVE the top bin: see README)
 *   C2  1-of-8, one run           taken .125 b2  transition .25 b1
 *   C3  runs of 8 (i&8)           taken .5 b0    transition .125 b2
 *   C4  always taken              taken 0 b10    transition 0 b10
 *   C5  LCG top 5 bits == 0       taken ~1/32 (edge of b3/b4; .031093 at the default -> b4)
 *                                 transition ~2p(1-p) = .0602 b3
 *   loop                          taken 0 b10    transition 0 b10
 *   => 6 static branches, each 1/6.
 *
 * mode next (conditional jumps to the next instruction, as a clone's pattern branches are: both
 * directions run the same code, so only the condition says which one was taken):
 *   J1  test $1<<30 ; jz   next      always taken (i < 2^30)
 *   J2  test $1<<30 ; jnz  next      never taken
 *   J3  bt $63      ; jnc  next      always taken
 *   loop                             taken
 *   => 4 static branches, each 1/4, all in bin 10; taken more often than not: J1, J3, loop (3/4).
 *   Valgrind's IR gives such a jump one exit whose destination is the next instruction either way
 *   (jz exits when taken, jnz and jnc when not taken), so the destination cannot tell the direction.
 *
 * Instructions: ~45 per iteration (mid, 47.8 M in all), ~23 (classic, 24.1 M); libc startup ~0.13 M.
 * No data accesses in the loop.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BT(mask, idx) \
  "movabs $" mask ", %[t]\n\tbt " idx ", %[t]\n\tjc 2f\n\tadd $1, %[acc]\n2:\n\t"
#define SHIFTED(k) "mov %[i], %[u]\n\tshr $" #k ", %[u]\n\t"

__attribute__((noinline)) static uint64_t run_mid(uint64_t n) {
  uint64_t i = 0, x = 0x853c49e6748fea9bull, acc = 0, t, u;
  const uint64_t mul = 6364136223846793005ull;
  __asm__ volatile(
      ".p2align 6\n"
      "1:\n\t"
      BT("0x60c30c30c30c30c3", "%[i]")            /* M1 */
      BT("0x000c0300c0300c03", "%[i]")            /* M2 */
      BT("0x00000c0000300003", "%[i]")            /* M3 */
      SHIFTED(1) BT("0x000ffc00ffe007ff", "%[u]") /* M4 */
      BT("0x0000040000200001", "%[i]")            /* M5 */
      SHIFTED(2) BT("0x0001fc0007f000ff", "%[u]") /* M6 */
      "imul %[mul], %[x]\n\tadd $1, %[x]\n\t"     /* LCG step */
      "mov %[x], %[t]\n\tshr $57, %[t]\n\tcmp $3, %[t]\n\tjb 2f\n\tadd $1, %[acc]\n2:\n\t" /* R1 */
      "mov %[x], %[t]\n\tshr $40, %[t]\n\tand $1023, %[t]\n\tcmp $3, %[t]\n\t"
      "jb 2f\n\tadd $1, %[acc]\n2:\n\t"                                                  /* R2 */
      "bt $63, %[i]\n\tjc 2f\n\tadd $1, %[acc]\n2:\n\t"                                  /* N0 */
      "add $1, %[i]\n\tcmp %[n], %[i]\n\tjb 1b\n\t"                                      /* loop */
      : [i] "+r"(i), [x] "+r"(x), [acc] "+r"(acc), [t] "=&r"(t), [u] "=&r"(u)
      : [n] "r"(n), [mul] "r"(mul)
      : "cc");
  return acc;
}

__attribute__((noinline)) static uint64_t run_classic(uint64_t n) {
  uint64_t i = 0, x = 0x853c49e6748fea9bull, acc = 0, t, u;
  const uint64_t mul = 6364136223846793005ull;
  __asm__ volatile(
      ".p2align 6\n"
      "1:\n\t"
      BT("0xaaaaaaaaaaaaaaaa", "%[i]")                  /* C1 */
      BT("0x0101010101010101", "%[i]")                  /* C2 */
      BT("0xff00ff00ff00ff00", "%[i]")                  /* C3 */
      "bt $63, %[i]\n\tjnc 2f\n\tadd $1, %[acc]\n2:\n\t" /* C4 */
      "imul %[mul], %[x]\n\tadd $1, %[x]\n\t"
      "mov %[x], %[t]\n\tshr $59, %[t]\n\ttest %[t], %[t]\n\tjz 2f\n\tadd $1, %[acc]\n2:\n\t" /* C5 */
      "add $1, %[i]\n\tcmp %[n], %[i]\n\tjb 1b\n\t"                                          /* loop */
      : [i] "+r"(i), [x] "+r"(x), [acc] "+r"(acc), [t] "=&r"(t), [u] "=&r"(u)
      : [n] "r"(n), [mul] "r"(mul)
      : "cc");
  return acc;
}

__attribute__((noinline)) static uint64_t run_next(uint64_t n) {
  uint64_t i = 0;
  __asm__ volatile(
      ".p2align 6\n"
      "1:\n\t"
      "test $0x40000000, %k[i]\n\tjz 2f\n2:\n\t"   /* J1 */
      "test $0x40000000, %k[i]\n\tjnz 2f\n2:\n\t"  /* J2 */
      "bt $63, %[i]\n\tjnc 2f\n2:\n\t"             /* J3 */
      "add $1, %[i]\n\tcmp %[n], %[i]\n\tjb 1b\n\t" /* loop */
      : [i] "+r"(i)
      : [n] "r"(n)
      : "cc");
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "mid";
  uint64_t n = argc > 2 ? strtoull(argv[2], 0, 0) : 1048576ull;
  if (n == 0) n = 1;
  uint64_t acc;
  if (!strcmp(mode, "mid")) acc = run_mid(n);
  else if (!strcmp(mode, "classic")) acc = run_classic(n);
  else if (!strcmp(mode, "next")) acc = run_next(n);
  else {
    fprintf(stderr, "usage: %s [mid|classic|next] [ITERS]\n", argv[0]);
    return 2;
  }
  printf("branches mode=%s iters=%llu fallthroughs=%llu\n", mode, (unsigned long long)n,
         (unsigned long long)acc);
  return 0;
}

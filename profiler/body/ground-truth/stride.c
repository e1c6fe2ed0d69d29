/*
 * stride: a known mix of constant-stride and random data accesses.
 *
 * usage: stride [R] [ITERS]     R = strided slots out of 4 (0..4, default 2 = 50/50), ITERS default 1500000
 *
 * One inline-asm loop; an iteration makes exactly 4 loads, one per slot, each slot a distinct static
 * instruction with its own 16 MiB region of a 64 MiB buffer (never written: the loads read zero pages):
 *   strided slot:  mov (base_k + off),%t ; add %t,%acc                       off += 64 per iteration
 *   random slot:   x = x * 6364136223846793005 + 1 ; mov (base_k + ((x >> 40) & 0xffffc0)),%t ; add
 * Slots 0..R-1 are strided, slots R..3 random. The random address comes from a register LCG, never
 * from a load, so nothing here is pointer chasing.
 *
 * Expected:
 *  - regular_access_fraction = R/4: 1.0, 0.75, 0.5 (default), 0.25, 0.0. A strided slot's delta is a
 *    constant +64 B except once per 262144 iterations (wrap at 16 MiB, < 6 breaks per run); a random
 *    slot's consecutive deltas repeat with probability ~2^-18 per access. libc startup < 0.3 % of accesses.
 *  - pointer_chase_fraction 0; shared_data_fraction 0 (one thread).
 *  - Data hit rate (any cache up to 2 MiB): strided slots miss once per line (1 access per 64-B line ->
 *    ~0 hits), random slots hit ~C/16 MiB -> the whole curve stays near 0 up to 2 MiB.
 *  - Instructions per iteration: 2 per strided slot, 7 per random slot, 4 loop -> 12 (R=4) .. 32 (R=0);
 *    18 M .. 48 M at the default ITERS.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REGION (16ull << 20)
#define S(k) "mov (%[b" #k "],%[off]), %[t]\n\tadd %[t], %[acc]\n\t"
#define R(k)                                                                              \
  "imul %[mul], %[x]\n\tadd $1, %[x]\n\tmov %[x], %[t]\n\tshr $40, %[t]\n\tand %[lm], %[t]\n\t" \
  "mov (%[b" #k "],%[t]), %[t]\n\tadd %[t], %[acc]\n\t"

#define MIX(name, S0, S1, S2, S3)                                                          \
  __attribute__((noinline)) static uint64_t name(char *buf, uint64_t n) {                  \
    uint64_t off = 0, x = 0x853c49e6748fea9bull, acc = 0, t;                                \
    __asm__ volatile(".p2align 6\n1:\n\t" S0 S1 S2 S3                                      \
                     "add $64, %[off]\n\tand %[wm], %[off]\n\tsub $1, %[n]\n\tjne 1b\n\t"  \
                     : [n] "+r"(n), [off] "+r"(off), [x] "+r"(x), [acc] "+r"(acc),          \
                       [t] "=&r"(t)                                                        \
                     : [b0] "r"(buf), [b1] "r"(buf + REGION), [b2] "r"(buf + 2 * REGION),  \
                       [b3] "r"(buf + 3 * REGION), [mul] "r"(6364136223846793005ull),      \
                       [lm] "r"(0xffffc0ull), [wm] "r"(REGION - 1)                          \
                     : "cc", "memory");                                                    \
    return acc;                                                                            \
  }

MIX(mix0, R(0), R(1), R(2), R(3))
MIX(mix1, S(0), R(1), R(2), R(3))
MIX(mix2, S(0), S(1), R(2), R(3))
MIX(mix3, S(0), S(1), S(2), R(3))
MIX(mix4, S(0), S(1), S(2), S(3))

int main(int argc, char **argv) {
  int r = argc > 1 ? atoi(argv[1]) : 2;
  uint64_t n = argc > 2 ? strtoull(argv[2], 0, 0) : 1500000ull;
  if (r < 0 || r > 4 || n == 0) {
    fprintf(stderr, "usage: %s [0..4] [ITERS]\n", argv[0]);
    return 2;
  }
  char *buf = aligned_alloc(4096, 4 * REGION);
  if (!buf) return 1;
  static uint64_t (*const fns[])(char *, uint64_t) = {mix0, mix1, mix2, mix3, mix4};
  uint64_t acc = fns[r](buf, n);
  printf("stride R=%d/4 iters=%llu acc=%llu\n", r, (unsigned long long)n, (unsigned long long)acc);
  return 0;
}

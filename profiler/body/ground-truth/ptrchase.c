/*
 * ptrchase: loads whose address comes from the previous load, vs loads that are independent.
 *
 * usage: ptrchase [chase|index|array|mixed] [ITERS]    default chase; ITERS default 10 M (chase,
 *                                                      index) or 4 M (array, mixed)
 *
 * 4096 nodes of 64 B (256 KiB, 4 KiB-aligned). Sattolo's shuffle makes next[] ONE random cycle through
 * all nodes; node i holds the pointer &node[next[i]] at offset 0 and the byte offset next[i]*64 at
 * offset 8. Each mode is one inline-asm loop:
 *   chase: mov (%p),%p                                  1 load/step, address = previous load's value
 *   index: mov 8(%base,%o),%o                           1 load/step, address = base + previous load's value
 *   array: x = x*6364136223846793005+1 ; o = (x>>40) & 0x3ffc0 ; mov (%base,%o),%t ; add %t,%acc
 *                                                       1 load/step, address from a register LCG only
 *   mixed: chase load, then one array load              2 loads/step, 1 of them chasing
 * (+ sub/jne per step). All modes walk the same 256 KiB, in a random order.
 *
 * Expected pointer_chase_fraction (share of loads): chase 1.0, index 1.0, array 0.0, mixed 0.5
 * (setup: Sattolo over 4096 entries + linking, ~0.1 M instructions and ~20 K loads/stores, none
 * chasing, and libc startup ~30 K loads: together < 0.5 % of the loads at the default ITERS).
 * regular_access_fraction ~ 0 in every mode (random order). Data working set: 256 KiB -> hit rate ~0
 * below 128 KiB and ~1 at >= 256 KiB (chase/index; array/mixed as well, same lines, random reuse:
 * for array, hit(C) ~ C/256 KiB below 256 KiB, as a random-reference LRU).
 * Instructions: chase/index 3 per step, array 8, mixed 9.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NODES 4096
#define NODE 64

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t xorshift(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

#define LCG_LOAD(base)                                                          \
  "imul %[mul], %[x]\n\tadd $1, %[x]\n\tmov %[x], %[t]\n\tshr $40, %[t]\n\t"    \
  "and $0x3ffc0, %[t]\n\tmov (" base ",%[t]), %[t]\n\tadd %[t], %[acc]\n\t"

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "chase";
  int chase = !strcmp(mode, "chase"), index = !strcmp(mode, "index");
  int array = !strcmp(mode, "array"), mixed = !strcmp(mode, "mixed");
  if (!(chase || index || array || mixed)) {
    fprintf(stderr, "usage: %s [chase|index|array|mixed] [ITERS]\n", argv[0]);
    return 2;
  }
  uint64_t n = argc > 2 ? strtoull(argv[2], 0, 0) : (chase || index) ? 10000000ull : 4000000ull;
  if (n == 0) n = 1;

  char *nodes = aligned_alloc(4096, NODES * NODE);
  uint32_t *next = malloc(NODES * sizeof *next);
  if (!nodes || !next) return 1;
  for (uint32_t i = 0; i < NODES; i++) next[i] = i;
  for (uint32_t i = NODES - 1; i > 0; i--) { /* Sattolo: j < i gives a single cycle */
    uint32_t j = (uint32_t)(xorshift() % i), tmp = next[i];
    next[i] = next[j];
    next[j] = tmp;
  }
  for (uint32_t i = 0; i < NODES; i++) {
    *(char **)(nodes + (uint64_t)i * NODE) = nodes + (uint64_t)next[i] * NODE;
    *(uint64_t *)(nodes + (uint64_t)i * NODE + 8) = (uint64_t)next[i] * NODE;
  }

  char *p = nodes;
  uint64_t o = 0, x = 0x853c49e6748fea9bull, acc = 0, t;
  const uint64_t mul = 6364136223846793005ull;
  if (chase)
    __asm__ volatile(".p2align 6\n1:\n\tmov (%[p]), %[p]\n\tsub $1, %[n]\n\tjne 1b\n\t"
                     : [p] "+r"(p), [n] "+r"(n)::"cc", "memory");
  else if (index)
    __asm__ volatile(".p2align 6\n1:\n\tmov 8(%[b],%[o]), %[o]\n\tsub $1, %[n]\n\tjne 1b\n\t"
                     : [o] "+r"(o), [n] "+r"(n)
                     : [b] "r"(nodes)
                     : "cc", "memory");
  else if (array)
    __asm__ volatile(".p2align 6\n1:\n\t" LCG_LOAD("%[b]") "sub $1, %[n]\n\tjne 1b\n\t"
                     : [x] "+r"(x), [acc] "+r"(acc), [t] "=&r"(t), [n] "+r"(n)
                     : [b] "r"(nodes), [mul] "r"(mul)
                     : "cc", "memory");
  else
    __asm__ volatile(".p2align 6\n1:\n\tmov (%[p]), %[p]\n\t" LCG_LOAD("%[b]")
                     "sub $1, %[n]\n\tjne 1b\n\t"
                     : [p] "+r"(p), [x] "+r"(x), [acc] "+r"(acc), [t] "=&r"(t), [n] "+r"(n)
                     : [b] "r"(nodes), [mul] "r"(mul)
                     : "cc", "memory");
  printf("ptrchase mode=%s end=%llu off=%llu acc=%llu\n", mode,
         (unsigned long long)((p - nodes) / NODE), (unsigned long long)(o / NODE),
         (unsigned long long)acc);
  return 0;
}

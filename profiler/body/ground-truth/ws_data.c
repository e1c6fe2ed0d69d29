/*
 * ws_data: a data working set of exactly S bytes.
 *
 * usage: ws_data SIZE [STEPS]     SIZE = 4K | 64K | 1M | 8M (any power of two >= 256), STEPS default 10000000
 *
 * The S-byte buffer (aligned to 4 KiB) is cut into N = S/64 lines. Line h(i) holds a pointer to line
 * h(i+1 mod N), where h is a bijection on [0, N) (odd multiply / xor-shift mixing), so the pointers form
 * ONE cycle through all N lines in a scrambled order. The measured loop (walk(), see its assembly in the
 * README) is exactly three instructions per step:
 *     mov (%rax),%rax ; sub $1,%rdx ; jne
 * i.e. one 8-byte load per step and no other data access (no stack, no spills).
 *
 * Expected, derived analytically:
 *  - Every walk load re-references a line last touched exactly N distinct lines ago (the cycle), so its
 *    LRU stack distance is N lines = S bytes. Fully associative LRU: hit = 0 for C < S, hit = 1 for C >= S.
 *    Set-associative (64-byte lines, power-of-two sets, W ways) gives the same step: a contiguous S-byte
 *    buffer puts exactly W * S/C lines in every set, visited cyclically, so every set either fits
 *    (C >= S) or thrashes completely under LRU (C < S).
 *  - Hit rate at C = S/4 (8-way below 1 MiB, 16-way at/above): 0 (+ the few startup hits, < 0.5 %).
 *  - Hit rate at C = 2S: 1 - compulsory, compulsory = N setup stores (one cold miss per line) over
 *    STEPS + N data accesses: 4K 0.0006 %, 64K 0.01 %, 1M 0.16 %, 8M 1.3 % (plus libc startup's
 *    ~1.4 K misses of its ~41 K accesses, 0.01 %).
 *  - The hit curve therefore steps from ~0 to ~1 between S/2 and S.
 *  - Pointer chasing: every walk load takes its address from the previous load -> pointer_chase_fraction
 *    ~ 1. Consecutive addresses are scrambled -> regular_access_fraction ~ 0 (the setup stores and the
 *    walk loads both follow the scrambled order). Single thread -> shared_data_fraction 0.
 *  - Instructions: 3 per step (30 M at the default) + setup ~19 per line (2.5 M = 7.6 % of the run for
 *    8M, <= 0.6 % for the others) + libc startup ~0.13 M. Pass a larger STEPS to dilute the setup.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define LINE 64

static uint64_t parse_size(const char *s) {
  char *end;
  uint64_t v = strtoull(s, &end, 0);
  if (*end == 'K' || *end == 'k') v <<= 10;
  else if (*end == 'M' || *end == 'm') v <<= 20;
  return v;
}

/* Bijection on [0, 2^bits): each step (odd multiply mod 2^bits, xor with a right shift) is invertible. */
static inline uint64_t h(uint64_t x, unsigned bits, uint64_t mask) {
  unsigned s = bits / 2 + 1;
  x = (x * 0x9E3779B97F4A7C15ull) & mask;
  x ^= x >> s;
  x = (x * 0xD6E8FEB86659FD93ull) & mask;
  return x ^ (x >> s);
}

__attribute__((noinline)) static void *walk(void *p, uint64_t steps) {
  do {
    p = *(void *volatile *)p; /* one load per step; volatile keeps gcc from reshaping it */
  } while (--steps);
  return p;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s SIZE(4K|64K|1M|8M) [STEPS]\n", argv[0]);
    return 2;
  }
  uint64_t size = parse_size(argv[1]);
  uint64_t steps = argc > 2 ? strtoull(argv[2], 0, 0) : 10000000ull;
  if (size < 256 || (size & (size - 1)) || steps == 0) {
    fprintf(stderr, "SIZE must be a power of two >= 256, STEPS > 0\n");
    return 2;
  }
  uint64_t n = size / LINE, mask = n - 1;
  unsigned bits = 0;
  while ((1ull << bits) < n) bits++;
  char *buf = aligned_alloc(4096, size);
  if (!buf) return 1;
  /* link h(0) -> h(1) -> ... -> h(n-1) -> h(0): one store per line */
  uint64_t first = h(0, bits, mask), prev = first;
  for (uint64_t i = 1; i < n; i++) {
    uint64_t cur = h(i, bits, mask);
    *(void **)(buf + prev * LINE) = buf + cur * LINE;
    prev = cur;
  }
  *(void **)(buf + prev * LINE) = buf + first * LINE;

  void *end = walk(buf + first * LINE, steps);
  printf("ws_data size=%llu lines=%llu steps=%llu end=%llu\n", (unsigned long long)size,
         (unsigned long long)n, (unsigned long long)steps,
         (unsigned long long)(((char *)end - buf) / LINE));
  return 0;
}

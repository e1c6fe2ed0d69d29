/*
 * icache: an instruction working set of exactly S bytes of executed code, run over and over.
 *
 * usage: icache [dense|sparse] [SIZE] [PASSES]    SIZE = 16K | 64K | 256K | 1M (default dense 16K);
 *                                                 PASSES default: ~33.5 M instructions in all
 *
 * Each body is one inline-asm loop, 4 KiB-aligned, whose executed code covers exactly S/64 cache
 * lines and nothing else (no call, no data access inside the loop):
 *   dense:  (S/64 - 1) lines of 16 x `lea 1(%reg),%reg` (4 bytes each, 4 registers in turn), then a
 *           last line with 13 leas + `sub $1,%rcx` + `jne top` (rel32): S/4 - 1 instructions per pass.
 *   sparse: (S/64 - 1) lines each holding one 2-byte `jmp` to the next line (the rest of the line is
 *           padding that never executes), then a last line with `sub` + `jne top`: S/64 + 1 instructions
 *           per pass, one line per executed instruction.
 * The loop sweeps the S/64 lines in address order, cyclically, so every line's LRU reuse distance is
 * S/64 lines: a cache of C >= S bytes keeps the whole body, C < S misses every line on every pass
 * (set-associative too: a contiguous body puts the same number of lines in every set).
 *
 * Expected instruction-side hit rate (per executed instruction, libc startup ~0.13 M is < 0.4 %):
 *   dense:  C < S: 1 - (S/64)/(S/4 - 1) = 0.9375 (one miss per 16 instructions); C >= S: ~1.
 *           (Per cache LINE fetched, i.e. counting consecutive fetches from one line once: 0 -> 1.)
 *   sparse: C < S: ~0 (1/(S/64+1)); C >= S: ~1. The step is at S in both layouts.
 *   Compulsory at C >= S: S/64 misses per run (1 M dense: 16384 / 33.5 M = 0.05 %).
 * Data side: no data accesses in the loop. Instruction pages (4 KiB) touched by the loop: exactly S/4096.
 * Dense mix: leas (alu-like, reg) ~ 1.0; sparse mix: 1/(S/64+1) jne, the rest direct `jmp`.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STR_(x) #x
#define STR(x) STR_(x)
#define CLOBBERS "rax", "rdx", "rsi", "rdi", "cc"

/* LINES = S/64 */
#define DENSE(name, LINES)                                                                       \
  __attribute__((noinline)) static void name(uint64_t n) {                                       \
    __asm__ volatile(".p2align 12\n9:\n\t"                                                        \
                     ".rept " STR(LINES) " - 1\n\t"                                              \
                     ".rept 4\n\tlea 1(%%rax),%%rax\n\tlea 1(%%rdx),%%rdx\n\t"                   \
                     "lea 1(%%rsi),%%rsi\n\tlea 1(%%rdi),%%rdi\n\t.endr\n\t"                     \
                     ".endr\n\t"                                                                 \
                     ".rept 3\n\tlea 1(%%rax),%%rax\n\tlea 1(%%rdx),%%rdx\n\t"                   \
                     "lea 1(%%rsi),%%rsi\n\tlea 1(%%rdi),%%rdi\n\t.endr\n\t"                     \
                     "lea 1(%%rax),%%rax\n\t"                                                    \
                     "sub $1, %%rcx\n\t"                                                         \
                     ".byte 0x0f, 0x85\n\t.long 9b - (. + 4)\n\t" /* jne rel32 */                \
                     : "+c"(n)                                                                   \
                     :                                                                           \
                     : CLOBBERS);                                                                \
  }
#define SPARSE(name, LINES)                                                                      \
  __attribute__((noinline)) static void name(uint64_t n) {                                       \
    __asm__ volatile(".p2align 12\n9:\n\t"                                                        \
                     ".rept " STR(LINES) " - 1\n\t"                                              \
                     ".byte 0xeb, 62\n\t" /* jmp rel8 to the next line */                        \
                     ".p2align 6, 0xcc\n\t"                                                      \
                     ".endr\n\t"                                                                 \
                     "sub $1, %%rcx\n\t"                                                         \
                     ".byte 0x0f, 0x85\n\t.long 9b - (. + 4)\n\t"                                \
                     : "+c"(n)                                                                   \
                     :                                                                           \
                     : CLOBBERS);                                                                \
  }

DENSE(dense16k, 256)
DENSE(dense64k, 1024)
DENSE(dense256k, 4096)
DENSE(dense1m, 16384)
SPARSE(sparse16k, 256)
SPARSE(sparse64k, 1024)
SPARSE(sparse256k, 4096)
SPARSE(sparse1m, 16384)

static uint64_t parse_size(const char *s) {
  char *end;
  uint64_t v = strtoull(s, &end, 0);
  if (*end == 'K' || *end == 'k') v <<= 10;
  else if (*end == 'M' || *end == 'm') v <<= 20;
  return v;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "dense";
  uint64_t size = parse_size(argc > 2 ? argv[2] : "16K");
  int dense = !strcmp(mode, "dense"), sparse = !strcmp(mode, "sparse");
  int idx = size == 16384 ? 0 : size == 65536 ? 1 : size == 262144 ? 2 : size == 1048576 ? 3 : -1;
  if (!(dense || sparse) || idx < 0) {
    fprintf(stderr, "usage: %s [dense|sparse] [16K|64K|256K|1M] [PASSES]\n", argv[0]);
    return 2;
  }
  uint64_t per_pass = dense ? size / 4 - 1 : size / 64 + 1;
  uint64_t passes = argc > 3 ? strtoull(argv[3], 0, 0) : (1ull << 25) / per_pass;
  if (passes == 0) passes = 1;
  static void (*const fns[2][4])(uint64_t) = {
      {dense16k, dense64k, dense256k, dense1m}, {sparse16k, sparse64k, sparse256k, sparse1m}};
  fns[sparse][idx](passes);
  printf("icache mode=%s size=%llu passes=%llu instructions/pass=%llu\n", mode,
         (unsigned long long)size, (unsigned long long)passes, (unsigned long long)per_pass);
  return 0;
}

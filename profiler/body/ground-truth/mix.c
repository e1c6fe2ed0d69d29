/*
 * mix: a known instruction mix, one fixed inline-asm loop.
 *
 * usage: mix [ITERS] [REP]      ITERS default 1000000, REP = rep movsb byte count, 1..64 (default 16)
 *
 * One iteration executes these 24 instructions, in this order (operand kind after the class):
 *   #   instruction                      class/operand (proposed)   count
 *   1   mov (src),%rax                   mov load                   \ 2
 *   2   mov 8(src),%rdx                  mov load                   /
 *   3-6 add/xor/sub/or reg,reg           alu reg                    4
 *   7   add 16(src),%r8                  alu load                   1
 *   8   mov %r8,24(dst)                  mov store                  1
 *   9   addq $1,32(dst)                  alu rmw                    1
 *   10  imul %rax,%r10                   mul reg                    1
 *   11  mov %reg,%rax                    mov reg                    1
 *   12  xor %edx,%edx                    alu reg                    1
 *   13  div %rbx  (rdx:rax / 7)          div reg                    1
 *   14  lock xadd %r11,(cnt)             atomic rmw                 1
 *   15  addsd %xmm3,%xmm2                fp reg (scalar SSE2)       1
 *   16  addpd %xmm1,%xmm0                simd128 reg (packed SSE2)  1
 *   17  vaddpd %ymm5,%ymm4,%ymm4         simd256 reg (AVX)          1
 *   18  crc32q %rax,%r11                 crc32 reg (SSE4.2)         1
 *   19-21 mov src,%rsi / to,%rdi / $REP,%ecx    mov reg             3
 *   22  rep movsb                        string (rep)               1, moving REP bytes
 *   23  sub $1,%reg (loop counter)       alu reg                    1
 *   24  jne                              branch (conditional)       1
 * Expected shares, counting rep movsb once per execution (architectural, as retired-instruction
 * counters do): 24 per iteration -> mov reg 4/24 .1667, mov load 2/24 .0833, mov store 1/24 .0417,
 * alu reg 6/24 .25, alu load 1/24, alu rmw 1/24, mul 1/24, div 1/24, atomic rmw 1/24, fp 1/24,
 * simd128 1/24, simd256 1/24, crc32 1/24, string 1/24, branch 1/24 (each 1/24 = .0417).
 * Valgrind executes rep movsb as REP + 1 guest executions of the same instruction (one per byte, then
 * one with rcx = 0 that exits), so a raw Valgrind count is 24 + REP per iteration (40 at REP 16:
 * string 17/40 = .425); rep_counts: every execution moves REP (16) bytes. Branches: 1 conditional jump
 * (jne) per iteration, taken rate ~0. Valgrind IR adds conditional side exits that are NOT x86
 * branches: one per rep movsb guest execution (REP + 1) and one for lock xadd (the CAS retry), so
 * cachegrind reports 19 "conditional branches" per iteration at REP 16; a profiler must only count jcc.
 * Data accesses per iteration (a read-modify-write = one load + one store, as in the Valgrind IR):
 * loads 2 + 1 + 1 (addq) + 1 (xadd) + REP, stores 1 + 1 (addq) + 1 (xadd) + REP (1-byte accesses for
 * movsb): 21 + 19 at REP 16; all to three 64-B lines (src, dst, cnt) and the REP-byte copy target.
 * Per static access the address repeats (stride 0) except rep movsb's (stride +1 within an execution):
 * regular_access_fraction 28/40 = .70 if stride 0 is not regular, 36/40 = .90 if it is.
 * Mean instruction length: 87 bytes / 24 = 3.625 (Valgrind-weighted, rep movsb 17 times: 2.975).
 * Instructions: 24 M architectural (40 M Valgrind) at the default; startup < 0.5 %.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* one 64-byte line each: src (read), dst (written), cnt (lock xadd); `to` receives the rep movsb copy
   of the first REP bytes of src */
static uint64_t blk[24] __attribute__((aligned(64))) = {3, 5, 7, 11, 13, 17, 19, 23};
static char to[64] __attribute__((aligned(64)));

int main(int argc, char **argv) {
  uint64_t n = argc > 1 ? strtoull(argv[1], 0, 0) : 1000000ull;
  uint64_t rep = argc > 2 ? strtoull(argv[2], 0, 0) : 16;
  if (n == 0 || rep == 0 || rep > 64) {
    fprintf(stderr, "usage: %s [ITERS] [REP 1..64]\n", argv[0]);
    return 2;
  }
  uint64_t r8 = 1, r9 = 2, r10 = 3, r11 = 4;
  const double one = 1.0;
  __asm__ volatile(
      "movsd %[one], %%xmm1\n\tunpcklpd %%xmm1, %%xmm1\n\tmovsd %[one], %%xmm3\n\t"
      "xorpd %%xmm0, %%xmm0\n\txorpd %%xmm2, %%xmm2\n\t"
      "vxorpd %%ymm4, %%ymm4, %%ymm4\n\tvbroadcastsd %[one], %%ymm5\n\t"
      "mov $7, %%ebx\n\t"
      ".p2align 6\n1:\n\t"
      "mov (%[b]), %%rax\n\t"          /* 1  */
      "mov 8(%[b]), %%rdx\n\t"         /* 2  */
      "add %%rdx, %%rax\n\t"             /* 3  */
      "xor %%rax, %[r8]\n\t"             /* 4  */
      "sub %%rdx, %[r9]\n\t"             /* 5  */
      "or %[r9], %[r10]\n\t"             /* 6  */
      "add 16(%[b]), %[r8]\n\t"        /* 7  */
      "mov %[r8], 64+24(%[b])\n\t"      /* 8  */
      "addq $1, 64+32(%[b])\n\t"        /* 9  */
      "imul %%rax, %[r10]\n\t"           /* 10 */
      "mov %[r9], %%rax\n\t"             /* 11 */
      "xor %%edx, %%edx\n\t"             /* 12 */
      "div %%rbx\n\t"                    /* 13 */
      "lock xadd %[r11], 128(%[b])\n\t" /* 14 */
      "addsd %%xmm3, %%xmm2\n\t"         /* 15 */
      "addpd %%xmm1, %%xmm0\n\t"         /* 16 */
      "vaddpd %%ymm5, %%ymm4, %%ymm4\n\t" /* 17 */
      "crc32q %%rax, %[r11]\n\t"         /* 18 */
      "mov %[b], %%rsi\n\t"              /* 19 */
      "mov %[to], %%rdi\n\t"             /* 20 */
      "mov %k[rep], %%ecx\n\t"           /* 21 */
      "rep movsb\n\t"                    /* 22 */
      "sub $1, %[n]\n\t"                 /* 23 */
      "jne 1b\n\t"                       /* 24 */
      "vzeroupper\n\t"
      : [n] "+r"(n), [r8] "+r"(r8), [r9] "+r"(r9), [r10] "+r"(r10), [r11] "+r"(r11)
      : [b] "r"(blk), [to] "r"(to), [rep] "r"(rep), [one] "m"(one)
      : "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5",
        "cc", "memory");
  printf("mix iters=%s rep=%llu r8=%llu r10=%llu cnt=%llu dst=%llu to[0]=%c\n",
         argc > 1 ? argv[1] : "1000000", (unsigned long long)rep, (unsigned long long)r8,
         (unsigned long long)r10, (unsigned long long)blk[16], (unsigned long long)blk[12], to[0]);
  return 0;
}

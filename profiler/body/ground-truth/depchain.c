/*
 * depchain: register dependency chains with a known read-after-write distance K.
 *
 * usage: depchain [K] [ITERS]      K in {1, 2, 3, 4, 6, 8, 12} (default 4), ITERS default 125000
 *
 * One inline-asm loop (so the compiler cannot reorder or schedule it). Each iteration is 240
 * instructions `lea 1(%rR),%rR` cycling through K registers R0..R(K-1), then `sub $1,%rcx ; jne`:
 *     R0 R1 .. R(K-1) R0 R1 .. R(K-1) ... (240/K rounds)   sub   jne
 * lea reads and writes one register and does not touch the flags; no memory access in the loop.
 * Distance = how many dynamic instructions back the producer is (1 = the previous instruction).
 *
 * Expected per iteration (242 instructions, 242 register reads if flags count as a register,
 * 241 if they do not):
 *  - RAW: 240-K lea reads at distance K; the first K leas of an iteration read a value written in the
 *    previous iteration, at distance K+2 (the sub/jne sit in between); sub reads rcx at distance 242;
 *    jne reads the flags written by sub at distance 1.
 *    Bins (body.rs: 1, 2, 3-4, 5-8, 9-16, 17-32, 33-64, 65-128, 129-256, 257-512, 513+):
 *      K  bin(K)  bin(K+2)  share in bin(K) (flags counted)
 *      1  0       2         239/242 = .988 (+ jne 1/242 -> bin 0 .992), bin 2 1/242
 *      2  1       2         238/242 = .983, bin 2 .008
 *      3  2       3         237/242 = .979, bin 3 .012
 *      4  2       3         236/242 = .975, bin 3 .017
 *      6  3       3         240/242 = .992
 *      8  3       4         232/242 = .959, bin 4 .033
 *      12 4       4         240/242 = .992
 *    plus 1/242 in bin 8 (sub's rcx), 1/242 in bin 0 (jne's flags). Dominant RAW bin = bin(K).
 *  - WAR (a write's distance back to the last read of that register by an EARLIER instruction) and
 *    WAW: the same as RAW for the leas (each register is read and written once per K instructions).
 *  - Instruction mix: 240/242 = .992 alu-like lea (reg), 1/242 sub (alu reg), 1/242 jne (branch).
 *  - No data accesses inside the loop (data side = libc startup only).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* 240 instructions through the register list REGS (K registers): .rept 240/K over .irp REGS */
#define CHAIN(name, REPS, REGS)                                                   \
  __attribute__((noinline)) static void name(uint64_t n) {                      \
    __asm__ volatile(".p2align 6\n1:\n\t"                                       \
                     ".rept " #REPS "\n\t"                                      \
                     ".irp reg," REGS "\n\t"                                    \
                     "lea 1(%%\\reg), %%\\reg\n\t"                              \
                     ".endr\n\t"                                                \
                     ".endr\n\t"                                                \
                     "sub $1, %%rcx\n\t"                                        \
                     "jne 1b\n\t"                                               \
                     : "+c"(n)                                                  \
                     :                                                          \
                     : "rax", "rbx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", \
                       "r12", "r13", "r14", "r15", "cc");                       \
  }

CHAIN(chain1, 240, "rax")
CHAIN(chain2, 120, "rax,rdx")
CHAIN(chain3, 80, "rax,rdx,rsi")
CHAIN(chain4, 60, "rax,rdx,rsi,rdi")
CHAIN(chain6, 40, "rax,rdx,rsi,rdi,r8,r9")
CHAIN(chain8, 30, "rax,rdx,rsi,rdi,r8,r9,r10,r11")
CHAIN(chain12, 20, "rax,rdx,rsi,rdi,r8,r9,r10,r11,r12,r13,r14,r15")

int main(int argc, char **argv) {
  int k = argc > 1 ? atoi(argv[1]) : 4;
  uint64_t n = argc > 2 ? strtoull(argv[2], 0, 0) : 125000ull;
  if (n == 0) n = 1;
  switch (k) {
  case 1: chain1(n); break;
  case 2: chain2(n); break;
  case 3: chain3(n); break;
  case 4: chain4(n); break;
  case 6: chain6(n); break;
  case 8: chain8(n); break;
  case 12: chain12(n); break;
  default:
    fprintf(stderr, "usage: %s [1|2|3|4|6|8|12] [ITERS]\n", argv[0]);
    return 2;
  }
  printf("depchain k=%d iters=%llu instructions=%llu\n", k, (unsigned long long)n,
         (unsigned long long)n * 242);
  return 0;
}

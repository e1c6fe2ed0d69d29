/* body.S - the test clones' bodies: trivial, but they touch the first and last bytes of the
 * private buffer and the shared buffer, so Valgrind sees any buffer the runtime sized wrong.
 * struct ditto_body_ctx: priv at 0, shared at 8, request at 16, state[8] at 24. The test
 * configs use priv_bytes = shared_bytes = 4096. */
    .text

    .globl test_body_init
    .type test_body_init, @function
test_body_init:
    movq (%rdi), %rax
    movq $1, (%rax)             /* priv[0] = 1 */
    movq $0, 4088(%rax)         /* last 8 bytes of priv */
    ret
    .size test_body_init, .-test_body_init

    .globl test_body
    .type test_body, @function
test_body:
    movq (%rdi), %rax           /* priv */
    movq 8(%rdi), %rcx          /* shared */
    addq $1, 8(%rax)
    addq $1, 4088(%rax)
    lock addq $1, (%rcx)        /* shared between threads: atomic */
    lock addq $1, 4088(%rcx)
    movq 16(%rdi), %rdx         /* ctx->request */
    movq %rdx, 24(%rdi)         /* state[0] = request */
    ret
    .size test_body, .-test_body

    .globl test_acceptor_body
    .type test_acceptor_body, @function
test_acceptor_body:
    movq (%rdi), %rax
    addq $1, 16(%rax)
    ret
    .size test_acceptor_body, .-test_acceptor_body

    .globl test_background_body
    .type test_background_body, @function
test_background_body:
    movq (%rdi), %rax
    movq 8(%rdi), %rcx
    addq $1, 24(%rax)
    lock addq $1, 8(%rcx)
    ret
    .size test_background_body, .-test_background_body

    .section .note.GNU-stack,"",@progbits

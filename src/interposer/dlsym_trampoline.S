/*
 * Our exported dlsym. glibc's dlsym(RTLD_NEXT, ...) finds "the next object
 * after the caller", judged by its return address. A C wrapper would make
 * every RTLD_NEXT lookup look like it came from libgpuslice and break other
 * libraries' interposition, so RTLD_NEXT is passed on by a tail jump that
 * leaves the caller's return address in place. Real handles go to C, where
 * driver entry points are swapped for our wrappers.
 */
#if defined(__x86_64__)
    .text
    .globl dlsym
    .type dlsym, @function
dlsym:
    .cfi_startproc
    cmpq $-1, %rdi                /* RTLD_NEXT is ((void *) -1) */
    jne gs_dlsym_handle
    movq gs_real_dlsym(%rip), %rax
    testq %rax, %rax
    jz 1f
    jmp *%rax
1:  pushq %rdi                    /* first use: find glibc's dlsym */
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    subq $8, %rsp                 /* keep the stack 16-byte aligned */
    .cfi_adjust_cfa_offset 8
    call gs_resolve_libc_dlsym
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    jmp *%rax
    .cfi_endproc
    .size dlsym, .-dlsym
#elif defined(__aarch64__)
    .text
    .globl dlsym
    .type dlsym, %function
dlsym:
    .cfi_startproc
    cmn x0, #1                    /* RTLD_NEXT is ((void *) -1) */
    b.ne gs_dlsym_handle
    adrp x16, gs_real_dlsym
    ldr x16, [x16, :lo12:gs_real_dlsym]
    cbz x16, 1f
    br x16
1:  stp x29, x30, [sp, #-32]!
    .cfi_def_cfa_offset 32
    stp x0, x1, [sp, #16]
    bl gs_resolve_libc_dlsym
    mov x16, x0
    ldp x0, x1, [sp, #16]
    ldp x29, x30, [sp], #32
    .cfi_def_cfa_offset 0
    br x16
    .cfi_endproc
    .size dlsym, .-dlsym
#else
#error "dlsym_trampoline.S supports x86_64 and aarch64"
#endif
    .section .note.GNU-stack,"",%progbits

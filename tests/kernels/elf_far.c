// Calls a function the test maps far (more than 2 GiB) from any image.
extern int far_function(int x);

int call_far(int x) { return far_function(x) + 1; }

#if defined(__x86_64__)
// The same call as hand-written assembly emits it: a plain R_X86_64_PC32 after a call opcode.
__asm__(
    ".text\n"
    ".globl call_far_pc32\n"
    ".type call_far_pc32, @function\n"
    "call_far_pc32:\n"
    "  .byte 0xe8\n"
    "  .long far_function - . - 4\n"
    "  ret\n"
    ".size call_far_pc32, . - call_far_pc32\n");
#endif

// Built as a shared object (ET_DYN), which the loader refuses.
int shared_answer(void) { return 42; }

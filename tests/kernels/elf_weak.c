// A weak reference nothing defines resolves to null.
extern int rig_test_weak_missing(void) __attribute__((weak));

int has_weak(void) { return rig_test_weak_missing != 0; }

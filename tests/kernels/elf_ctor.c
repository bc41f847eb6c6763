// A constructor, which the loader refuses rather than skips.
static int initialised;

__attribute__((constructor)) static void initialise(void) { initialised = 1; }

int is_initialised(void) { return initialised; }

// Thread-local storage, which the loader refuses: defined here, or (RIG_EXTERN_TLS)
// defined elsewhere.
#if defined(RIG_EXTERN_TLS)
extern __thread int per_thread_counter;
#else
__thread int per_thread_counter;
#endif

int bump_per_thread(void) { return ++per_thread_counter; }

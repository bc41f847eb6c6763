// Calls a function nothing defines.
extern int rig_test_missing_symbol(void);

int use_missing(void) { return rig_test_missing_symbol() + 1; }

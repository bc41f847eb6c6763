// Undefined symbols the test's resolver provides: a function and a variable.
extern int host_scale(int x);
extern int host_bias;

int scaled_plus_bias(int x) { return host_scale(x) + host_bias; }

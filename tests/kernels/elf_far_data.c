// Reads variables the test maps far from any image, and far from each other:
// PC-relative without -fPIC, through the GOT with it.
extern int far_data;
extern int far_data_other;

int read_far_data(void) { return far_data; }

int read_far_data_other(void) { return far_data_other; }

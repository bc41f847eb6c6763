// A host kernel exercising what a loader must lay out and relocate: code calling code,
// static data, read-only tables, bss, a global shared by two functions, a table of
// function pointers and calls into libc.
#include <stddef.h>
#include <string.h>

static const int kPrimes[16] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53};
const int kSquares[8] = {0, 1, 4, 9, 16, 25, 36, 49};
const char greeting[] = "hello from an ELF kernel";

static int call_count;                  // bss, local
static int seeded[4] = {10, 20, 30, 40};  // data, local
static int scratch[1024];               // bss, local
int shared_total;                       // bss global (COMMON with -fcommon)

__attribute__((noinline)) static int square(int x) { return x * x; }
__attribute__((noinline)) int cube(int x) { return square(x) * x; }
__attribute__((noinline)) int negate(int x) { return -x; }

typedef int (*unary_fn)(int);
static unary_fn const operations[] = {cube, negate};

void fill_squares(int* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = square(i);
  ++call_count;
}

int fill_calls(void) { return call_count; }

int prime_at(int i) { return kPrimes[i & 15]; }

int bump_seeded(int i) { return ++seeded[i & 3]; }

int scratch_sum(int n) {
  int sum = 0;
  for (int i = 0; i < n && i < 1024; ++i) scratch[i] += i * 3;
  for (int i = 0; i < n && i < 1024; ++i) sum += scratch[i];
  return sum;
}

void add_to_total(int value) { shared_total += value; }

int get_total(void) { return shared_total; }

int sum_cubes(int n) {
  int sum = 0;
  for (int i = 0; i < n; ++i) sum += cube(i);
  return sum;
}

int apply_operation(int which, int x) { return operations[which & 1](x); }

size_t measure(const char* text) { return strlen(text); }

size_t copy_greeting(char* out, size_t capacity) {
  size_t length = measure(greeting);
  if (length + 1 > capacity) length = capacity - 1;
  memcpy(out, greeting, length);
  out[length] = '\0';
  return length;
}

void fill_bytes(void* out, int value, size_t count) { memset(out, value, count); }

void scale(float* values, int n, float factor) {
  for (int i = 0; i < n; ++i) values[i] = values[i] * factor + 0.5f;
}

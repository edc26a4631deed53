#pragma once
// glibc's <malloc.h> (mallinfo2), which Swift's Glibc module does not include; for the tests that
// measure the heap. No code here.
#include <malloc.h>

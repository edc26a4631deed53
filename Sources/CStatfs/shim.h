#pragma once
// glibc's <sys/statfs.h> (statfs, fstatfs and f_type), which Swift's Glibc module does not include;
// the policy loader checks that the key log lies on tmpfs. No code here.
#include <sys/statfs.h>

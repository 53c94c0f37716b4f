// GNNCORE_SHIFT_CLONES: a hot loop that shifts by counts known only at run
// time, compiled twice on x86-64 Linux with GCC (target_clones): for BMI2 and
// for the baseline, the loader picking one. A shift by a register count (cl)
// carries a dependency through the flags; BMI2's shlx/shrx do not: the key
// sort's bucket loops ran twice as fast with them (io/key_sort.cpp).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define GNNCORE_SHIFT_CLONES __attribute__((target_clones("bmi2", "default")))
#else
#define GNNCORE_SHIFT_CLONES
#endif

#pragma once
// How long OpenMP's idle threads spin, for a program that shares its cores.
//
// The CPU layers' regions (util/cpu_parallel.hpp) and OpenBLAS's OpenMP
// build run on libgomp's threads. After a region or an OpenBLAS call the
// idle threads spin before they sleep: GOMP_SPINCOUNT rounds, 300,000 by
// default (about 5 ms of a core on a 2-core EPYC). On an idle machine that
// bridges the gaps between the regions of a pass. On a loaded one every
// region or GEMM leaves a thread spinning on a core that the other
// processes (and this one's main thread) need, and a caller spins for a
// thread that has no core.
//
// The regions already shrink to the caller alone while other processes keep
// the cores busy (cpu_parallel.hpp, "A shared machine"), but OpenBLAS's
// GEMMs outside the regions keep their team of threads: OpenBLAS splits a
// GEMM by its thread count, and the kernels at the tiles' edges round
// differently (sgemm at LeNet's fully connected shapes, 64 x 500 x 800 say,
// gives other bits in a fifth of its outputs on one thread than on two), so
// running them on fewer threads under load would change the results.
//
// libgomp reads GOMP_SPINCOUNT and OMP_WAIT_POLICY once, when it is loaded,
// before main() runs, and has no call that changes them later. A program's
// own constructors run after libgomp's, and a variable set from a preinit
// function is lost (the C library sets up the environment after it). So a
// program that wants them set starts again: limit_openmp_spinning().

namespace cortado {

/// The GOMP_SPINCOUNT that limit_openmp_spinning() sets: a fraction of a
/// millisecond of spinning. Measured, LeNet's `trainer time` on 2 cores:
/// alone as fast as with libgomp's default; beside 2 to 4 busy processes
/// 1.5 to 2.2 times as fast (scripts/bench/lenet_loaded.sh), still below
/// its share of the machine: the GEMMs' teams above wait for each other.
constexpr long kOpenMpSpinCount = 10000;

/// For a program's main(), before anything else runs but its flags
/// (threads, logging, MPI); the trainer calls it right after parsing them,
/// with the argv it was given (before gflags took the flags out). Where
/// OMP_WAIT_POLICY and GOMP_SPINCOUNT are both unset or empty, the switch
/// cpu_share is on (cpu_parallel.hpp) and the regions run on OpenMP, it sets
/// GOMP_SPINCOUNT=kOpenMpSpinCount and runs the program again with that
/// argv: execv of /proc/self/exe, the same process id, open files and the
/// rest of the environment (children inherit the variable). It returns,
/// having changed nothing, where the user chose a setting, with cpu_share
/// off (libgomp's defaults, as before), or where the program cannot be run
/// again (no /proc): the program then goes on with libgomp's defaults.
/// Results do not depend on it: it changes only how long idle threads wait
/// before they sleep.
void limit_openmp_spinning(char** argv);

}  // namespace cortado

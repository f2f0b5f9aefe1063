/*
 * qthread/wavefront.h - Qthreads' wavefront pattern on cantus. Same names
 * and semantics as Qthreads.
 *
 * qt_wavefront(left, below, func) computes the lattice R of
 * below->count - 1 columns and left->count rows, where
 *     R[c][r] = func(left: R[c-1][r], leftdown: R[c-1][r-1],
 *                    down: R[c][r-1], out: &R[c][r])
 * with the edges R[-1][r] = left[r], R[c][-1] = below[c + 1] and the
 * corner R[-1][-1] = below[0] (element 0 of below is the bottom-left
 * corner). Elements are left->unit_size bytes (below's must be the same).
 * func is called exactly once per cell, after the three cells it reads.
 * The cells are computed in blocks (left->segment_size rows x
 * below->segment_size columns); a block is a task, started as soon as the
 * blocks to its left and below it are done, forked to the owner of
 * below's segment above which it sits; the call returns when all are
 * done. The result is kept as a lattice: the top row of every block (with
 * the cell left of its first) and the right column of every block, so
 * R[max][max] (the last cell of the top-right block) is in it; the other
 * cells are not kept (as in Qthreads: save what you need from func).
 * NULL on misuse or if memory runs out.
 * qt_wavefront_print_lattice: prints the lattice's rows and columns on
 *   stdout (values as doubles if the unit is 8 bytes, else in hex).
 * qt_wavefront_destroy_lattice: frees it (NULL: nothing).
 * qt_basic_wavefront: the same recurrence, sequential, on an int matrix
 *   R[col][row] in place: for col in 1..cols, row in 1..rows,
 *   func(&R[col-1][row], &R[col-1][row-1], &R[col][row-1], &R[col][row]).
 *
 * Differs: Qthreads' lattice holds qarrays and its blocks go through a
 * distributed queue to one worker task per shepherd; the lattice type is
 * opaque in both, and the values computed are the same.
 *
 * Contexts: a task or an outside thread, after qthread_initialize
 * (qt_basic_wavefront: anywhere, it makes no tasks).
 * Misuse (no runtime, NULL arrays or func, below->count < 2, unit sizes
 * that differ) is reported on stderr and in cantus_last_error(), and
 * nothing runs.
 * Undefined: func writing anything but its out cell.
 */
#ifndef QTHREAD_WAVEFRONT_H_CANTUS
#define QTHREAD_WAVEFRONT_H_CANTUS

#include "qarray.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*wave_comp_f)(const void *left, const void *leftdown, const void *down, void *out);

/* Declared as in Qthreads (no function takes it). */
typedef void (*wave_f)(qarray *left, qarray *below, void **R);

typedef struct qt_wavefront_lattice_s qt_wavefront_lattice;

qt_wavefront_lattice *qt_wavefront(qarray *left, qarray *below, wave_comp_f func);
void qt_wavefront_print_lattice(const qt_wavefront_lattice *L);
void qt_wavefront_destroy_lattice(qt_wavefront_lattice *L);

void qt_basic_wavefront(int *const *R, size_t cols, size_t rows, wave_comp_f func);

#ifdef __cplusplus
}
#endif

#endif /* QTHREAD_WAVEFRONT_H_CANTUS */

/*
 * qthread/qloop.hpp - the C++ forms of <qthread/qloop.h>'s loops, as in
 * Qthreads: each takes a function object instead of a function and its
 * argument, and calls obj(startat, stopat) for the pieces of [start,
 * stop) the C loop hands out (one iteration each for qt_loop and its
 * variants, a shepherd's share for the qt_loop_balance family).
 *
 * As in Qthreads, the object is passed by const reference but called
 * through a non-const reference (its operator() need not be const), and
 * it is shared by every piece: pieces run at once on several shepherds,
 * so what operator() changes in the object must be safe to change
 * concurrently. The call returns when every piece has run.
 *
 * Declared: qt_loop, qt_loop_simple, qt_loop_sinc, qt_loop_balance,
 * qt_loop_balance_simple, qt_loop_balance_sinc. Left out: the _future
 * forms and qt_loopaccum_balance (their C forms are left out of
 * <qthread/qloop.h>).
 */
#ifndef QTHREAD_QLOOP_HPP_CANTUS
#define QTHREAD_QLOOP_HPP_CANTUS

#include <qthread/qloop.h>

/* The C loop's body for a function object of type T: calls it on the
 * piece. (Internal.) */
template <typename T>
void qt_loop_cpp_piece_(size_t startat, size_t stopat, void *obj)
{
    (*static_cast<T *>(obj))(startat, stopat);
}

template <typename T>
void qt_loop(size_t start, size_t stop, T const &obj)
{
    qt_loop(start, stop, qt_loop_cpp_piece_<T>, const_cast<T *>(&obj));
}

template <typename T>
void qt_loop_simple(size_t start, size_t stop, T const &obj)
{
    qt_loop_simple(start, stop, qt_loop_cpp_piece_<T>, const_cast<T *>(&obj));
}

template <typename T>
void qt_loop_sinc(size_t start, size_t stop, T const &obj)
{
    qt_loop_sinc(start, stop, qt_loop_cpp_piece_<T>, const_cast<T *>(&obj));
}

template <typename T>
void qt_loop_balance(size_t start, size_t stop, T const &obj)
{
    qt_loop_balance(start, stop, qt_loop_cpp_piece_<T>, const_cast<T *>(&obj));
}

template <typename T>
void qt_loop_balance_simple(size_t start, size_t stop, T const &obj)
{
    qt_loop_balance_simple(start, stop, qt_loop_cpp_piece_<T>, const_cast<T *>(&obj));
}

template <typename T>
void qt_loop_balance_sinc(size_t start, size_t stop, T const &obj)
{
    qt_loop_balance_sinc(start, stop, qt_loop_cpp_piece_<T>, const_cast<T *>(&obj));
}

#endif /* QTHREAD_QLOOP_HPP_CANTUS */

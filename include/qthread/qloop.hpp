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
 * qt_loop_balance_simple, qt_loop_balance_sinc, and qt_loopaccum_balance
 * (as in Qthreads: T has a type acctype (trivially copyable), a value
 * T::identity and a function T::accumulate(void *a, const void *b); obj
 * returns a piece's acctype; the result starts as T::identity, is
 * overwritten by the first piece's value and accumulated with the others',
 * as the C call does).
 * Left out: qt_loop_future and qt_loop_balance_future (Qthreads 1.23's
 * templates call C functions of those names that it no longer has, so
 * they cannot be instantiated there either).
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

/* The C qt_loopaccum_balance's body for T: stores obj(startat, stopat) in
 * the piece's result. (Internal.) */
template <typename T>
void qt_loopaccum_cpp_piece_(size_t startat, size_t stopat, void *obj, void *ret)
{
    *static_cast<typename T::acctype *>(ret) = (*static_cast<T *>(obj))(startat, stopat);
}

template <typename T>
typename T::acctype qt_loopaccum_balance(size_t start, size_t stop, T const &obj)
{
    typename T::acctype result(T::identity);
    qt_loopaccum_balance(start, stop, sizeof(typename T::acctype), &result,
                         qt_loopaccum_cpp_piece_<T>, const_cast<T *>(&obj),
                         (qt_accum_f)(T::accumulate));
    return result;
}

#endif /* QTHREAD_QLOOP_HPP_CANTUS */

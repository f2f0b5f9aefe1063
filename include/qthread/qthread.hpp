/*
 * qthread/qthread.hpp - <qthread/qthread.h> for C++, with the syncvar
 * class of <qthread/syncvar.hpp>, as Qthreads' qthread.hpp.
 */
#ifndef QTHREAD_QTHREAD_HPP_CANTUS
#define QTHREAD_QTHREAD_HPP_CANTUS

#include <qthread/qthread.h>
#include <qthread/syncvar.hpp>

#endif /* QTHREAD_QTHREAD_HPP_CANTUS */

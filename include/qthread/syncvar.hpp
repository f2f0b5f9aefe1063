/*
 * qthread/syncvar.hpp - syncvar, Qthreads' C++ class around a syncvar_t:
 * the same operations as the qthread_syncvar_* calls on the variable it
 * holds (see <qthread/qthread.h>), with their return codes.
 *
 *   syncvar v;             full, 0 (as SYNCVAR_INITIALIZER)
 *   syncvar v(x);          full, x (60 bits: larger values are cut, as the
 *                          C calls cut them; Qthreads asserts instead)
 *   v.readFF() / v.readFE()           the value (0 if the call failed)
 *   v.readFF(&x) / v.readFE(&x)       the code, the value in *x
 *   v.writeF(x) / v.writeEF(x)        the code
 *   v.fill() / v.empty() / v.status() as qthread_syncvar_fill/empty/status
 *   v.read() / v.write(x)  the value bits without the full/empty protocol
 *                          (not for a variable others wait on)
 *
 * Left out: incr (qthread_syncvar_incrF is left out of qthread.h).
 * Copying a syncvar copies its word: never copy one that tasks wait on.
 */
#ifndef QTHREAD_SYNCVAR_HPP_CANTUS
#define QTHREAD_SYNCVAR_HPP_CANTUS

#include <qthread/qthread.h>

class syncvar {
  public:
    syncvar() noexcept { the_syncvar_t.u.w = 0; }
    syncvar(uint64_t const &val) noexcept
    {
        the_syncvar_t.u.w = 0;
        the_syncvar_t.u.s.data = val;
    }
    syncvar(syncvar const &other) noexcept { the_syncvar_t.u.w = other.the_syncvar_t.u.w; }
    syncvar(syncvar_t const &val) noexcept { the_syncvar_t.u.w = val.u.w; }

    int empty() { return qthread_syncvar_empty(&the_syncvar_t); }
    int fill() { return qthread_syncvar_fill(&the_syncvar_t); }
    int status() { return qthread_syncvar_status(&the_syncvar_t); }

    uint64_t readFF()
    {
        uint64_t v = 0;
        return qthread_syncvar_readFF(&v, &the_syncvar_t) == QTHREAD_SUCCESS ? v : 0;
    }
    int readFF(uint64_t *const dest) { return qthread_syncvar_readFF(dest, &the_syncvar_t); }
    uint64_t readFE()
    {
        uint64_t v = 0;
        return qthread_syncvar_readFE(&v, &the_syncvar_t) == QTHREAD_SUCCESS ? v : 0;
    }
    int readFE(uint64_t *const dest) { return qthread_syncvar_readFE(dest, &the_syncvar_t); }
    int writeF(uint64_t src) { return qthread_syncvar_writeF_const(&the_syncvar_t, src); }
    int writeEF(uint64_t const src) { return qthread_syncvar_writeEF_const(&the_syncvar_t, src); }

    uint64_t read() const { return the_syncvar_t.u.s.data; }
    void write(uint64_t const src) { the_syncvar_t.u.s.data = src; }

  protected:
    syncvar_t the_syncvar_t;
};

#endif /* QTHREAD_SYNCVAR_HPP_CANTUS */

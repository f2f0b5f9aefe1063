/*
 * qthread/cacheline.h - the cache line size, as Qthreads reports it.
 *
 * qthread_cacheline - the processor's level-1 data cache line in bytes
 *   (as the C library reports it; 64 if it does not). Needs no runtime.
 */
#ifndef QTHREAD_CACHELINE_H_CANTUS
#define QTHREAD_CACHELINE_H_CANTUS

#ifdef __cplusplus
extern "C" {
#endif

int qthread_cacheline(void);

#ifdef __cplusplus
}
#endif

#endif /* QTHREAD_CACHELINE_H_CANTUS */

/*
 * qthread/hash.h - Qthreads' hash functions on cantus, for keys of the
 * dictionary (<qthread/dictionary.h>) and anything else:
 *
 *   qt_hash64(key)                      a well-mixed 64-bit hash of a
 *                                       64-bit key; a bijection, so two
 *                                       keys never collide.
 *   qt_hash_bytes(key_ptr, bytes, state) the hash of `bytes` bytes at
 *                                       key_ptr, seeded with `state`
 *                                       (GOLDEN_RATIO is the usual seed).
 *
 * Both are deterministic and need no runtime. Differs from Qthreads: the
 * values (Qthreads mixes with Bob Jenkins' lookup2; cantus with its own
 * xor-shift-multiply rounds), which nothing may rely on; only the
 * contract is kept: equal inputs give equal hashes, and any changed input
 * bit changes about half the output bits.
 * Misuse: key_ptr NULL with bytes > 0 is reported in cantus_last_error()
 *           and gives `state`.
 */
#ifndef QTHREAD_HASH_H_CANTUS
#define QTHREAD_HASH_H_CANTUS

#include "qthread.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2^64 / phi, as Qthreads defines it (64-bit aligned_t). */
#define GOLDEN_RATIO 0x9e3779b97f4a7c13LL

uint64_t qt_hash64(uint64_t key);
aligned_t qt_hash_bytes(void *key_ptr, size_t bytes, aligned_t state);

#ifdef __cplusplus
}
#endif

#endif /* QTHREAD_HASH_H_CANTUS */

/*
 * qthread/dictionary.h - Qthreads' concurrent dictionary on cantus: a
 * hash map from void * keys to void * values, compared with the user's
 * equality function and hashed with the user's hash function (equal keys
 * must hash equal), with a cleanup callback for entries that leave it.
 * Every call may come from any task or thread at the same time.
 *
 *   qt_dictionary_create(eq, hash, cleanup)  NULL without a runtime or
 *                                  for a NULL eq or hash; cleanup may be
 *                                  NULL.
 *   qt_dictionary_put(d, k, v)     maps k to v, replacing the value of an
 *                                  equal key already there (the entry
 *                                  keeps its first key, and no cleanup
 *                                  runs for the replaced value); returns v.
 *   qt_dictionary_put_if_absent(d, k, v)  maps k to v unless an equal key
 *                                  is there; returns the value k has
 *                                  afterwards (the old one, if present).
 *   qt_dictionary_get(d, k)        the value of k, NULL if absent.
 *   qt_dictionary_delete(d, k)     removes k and returns its value (NULL
 *                                  if absent); cleanup(key, NULL) runs on
 *                                  the stored key, as in Qthreads (the
 *                                  value goes back to the caller).
 *   qt_dictionary_destroy(d)       frees d; cleanup(key, value) runs for
 *                                  each entry still in it (as Qthreads'
 *                                  implementations do).
 *   Iterators: _iterator_create is before the first entry, _next moves
 *                                  to the next one and returns it (NULL
 *                                  past the last; the iterator then equals
 *                                  qt_dictionary_end's), _get returns the
 *                                  current entry (NULL before the first
 *                                  and past the last), _equals compares
 *                                  dictionary and place, _copy clones.
 *                                  Entries come in an order of their
 *                                  hashes (equal hashes in insertion
 *                                  order). Puts and deletes meanwhile are
 *                                  allowed: an iterator whose own entry
 *                                  was deleted goes on with the next hash
 *                                  (Qthreads: undefined).
 *   qt_dictionary_printbuckets(d)  prints each shard's entries (stdout).
 *
 * A list_entry stays valid until its key is deleted or the dictionary
 * destroyed; its value may change under a concurrent put; `next` links
 * entries whose keys have the same hash (read it only while nothing
 * changes the dictionary); hashed_key is the user's hash of key.
 * Returns: NULL from put/get/delete for a NULL dictionary; ERROR from the
 *           iterator calls for a NULL iterator (or dictionary); all
 *           reported in cantus_last_error(). A NULL value can be stored,
 *           but then reads as absent (as in Qthreads).
 * Layout: 64 shards, each a lock over an ordered map from the (spread)
 *           hash to the chain of its entries; the user's hash function
 *           runs outside every lock, the equality function under the
 *           key's shard lock, cleanup outside the lock.
 * Undefined: eq or cleanup waiting for other tasks or calling the same
 *           dictionary (eq runs under a lock); using a dictionary, or
 *           its iterators, after qt_dictionary_destroy; reading an entry
 *           after its key was deleted.
 * Differs from Qthreads: BKT_POW and NO_BUCKETS are kept for programs
 *           that name them, but cantus's table has no fixed bucket count;
 *           printbuckets prints shards, not buckets.
 */
#ifndef QT_DICTIONARY_H_CANTUS
#define QT_DICTIONARY_H_CANTUS

#include <inttypes.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DELETE_SUPPORT
#define ERROR ((void *)(-1))
#define BKT_POW 20
#define NO_BUCKETS (1 << BKT_POW)

typedef int (*qt_dict_key_equals_f)(void *, void *);
typedef int (*qt_dict_hash_f)(void *);
typedef void (*qt_dict_cleanup_f)(void *, void *);

struct list_entry {
    void *value;
    void *key;
    uint64_t hashed_key;
    struct list_entry *next;
};

typedef struct list_entry list_entry;
typedef struct qt_dictionary qt_dictionary;
typedef struct qt_dictionary_iterator qt_dictionary_iterator;

qt_dictionary *qt_dictionary_create(qt_dict_key_equals_f eq, qt_dict_hash_f hash,
                                    qt_dict_cleanup_f cleanup);
void qt_dictionary_destroy(qt_dictionary *d);
void *qt_dictionary_put(qt_dictionary *dict, void *key, void *value);
void *qt_dictionary_put_if_absent(qt_dictionary *dict, void *key, void *value);
void *qt_dictionary_get(qt_dictionary *dict, void *key);
void *qt_dictionary_delete(qt_dictionary *dict, void *key);
qt_dictionary_iterator *qt_dictionary_iterator_create(qt_dictionary *dict);
void qt_dictionary_iterator_destroy(qt_dictionary_iterator *it);
list_entry *qt_dictionary_iterator_next(qt_dictionary_iterator *it);
list_entry *qt_dictionary_iterator_get(const qt_dictionary_iterator *it);
qt_dictionary_iterator *qt_dictionary_end(qt_dictionary *dict);
int qt_dictionary_iterator_equals(qt_dictionary_iterator *a, qt_dictionary_iterator *b);
qt_dictionary_iterator *qt_dictionary_iterator_copy(qt_dictionary_iterator *b);
void qt_dictionary_printbuckets(qt_dictionary *dict);

#ifdef __cplusplus
}
#endif

#endif /* QT_DICTIONARY_H_CANTUS */

/* qthread.h - for programs that include <qthread.h>: the same as
 * <qthread/qthread.h>, cantus's Qthreads-compatible subset. */
#include "qthread/qthread.h"

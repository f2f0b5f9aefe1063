/*
 * qthread/qt_syscalls.h - system calls that block only the calling task,
 * as Qthreads has them: each takes the arguments and gives the result
 * and errno of the system call it is named after.
 *
 * Qthreads hands the call to one of its I/O threads and switches the task
 * out until it is done. cantus makes the plain call as a blocking action
 * (<qthread/io.h>): a task forked through this C ABI makes it on a
 * blocking-call thread of the runtime while its shepherd runs other
 * tasks, and comes back with the call's result and errno; any other
 * caller (an outside thread, Qthreads' main) makes it in place, its
 * thread blocked in it. Until the call returns the caller counts as
 * outside activity (the deadlock detector waits for what it brings).
 *
 * The declarations leave out Qthreads' `restrict` qualifiers (a function
 * whose parameters differ only in those is the same function in C), so
 * that the header is also C++.
 */
#ifndef QT_SYSCALLS_H_CANTUS
#define QT_SYSCALLS_H_CANTUS

#include <poll.h>         /* struct pollfd, nfds_t */
#include <sys/resource.h> /* struct rusage */
#include <sys/select.h>   /* fd_set, struct timeval */
#include <sys/socket.h>   /* struct sockaddr, socklen_t */
#include <sys/types.h>    /* ssize_t, off_t, pid_t */

#ifdef __cplusplus
extern "C" {
#endif

int qt_accept(int socket, struct sockaddr *address, socklen_t *address_len);
int qt_connect(int socket, const struct sockaddr *address, socklen_t address_len);
int qt_poll(struct pollfd *fds, nfds_t nfds, int timeout);
ssize_t qt_pread(int filedes, void *buf, size_t nbyte, off_t offset);
ssize_t qt_pwrite(int filedes, const void *buf, size_t nbyte, off_t offset);
ssize_t qt_read(int filedes, void *buf, size_t nbyte);
int qt_select(int nfds, fd_set *readfds, fd_set *writefds, fd_set *errorfds,
              struct timeval *timeout);
int qt_system(const char *command);
pid_t qt_wait4(pid_t pid, int *stat_loc, int options, struct rusage *rusage);
ssize_t qt_write(int filedes, const void *buf, size_t nbyte);

#ifdef __cplusplus
}
#endif

#endif

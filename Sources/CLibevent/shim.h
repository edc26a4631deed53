#pragma once
// libc headers first: event2/event-config.h defines _GNU_SOURCE, and a module whose first include is an
// event2 header would see different glibc feature macros than COpenSSL does (fd_set ODR errors).
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
// malloc_trim: Swift's Glibc module does not export malloc.h; ProxyCore hands memory back after bursts.
#include <malloc.h>
#include <fcntl.h>
#include <unistd.h>
#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/listener.h>
#include <event2/dns.h>
#include <event2/http.h>
#include <event2/thread.h>
#include <event2/util.h>

// splice(2) and F_SETPIPE_SZ are declared only under _GNU_SOURCE, which Swift's Glibc module does not
// set (and defining it here would change glibc's feature macros for this module alone). The fast
// relay's splice method needs both: the prototype and constants as in <fcntl.h> / <linux/fcntl.h>.
extern ssize_t splice(int fd_in, __off64_t *off_in, int fd_out, __off64_t *off_out, size_t len, unsigned int flags);
/// splice(from → to) of up to `len` bytes, moving pages and never blocking (SPLICE_F_MOVE | SPLICE_F_NONBLOCK).
static inline ssize_t pp_splice(int from, int to, size_t len) { return splice(from, 0, to, 0, len, 1u | 2u); }
/// fcntl(fd, F_SETPIPE_SZ, size): a pipe's capacity (F_SETPIPE_SZ = 1024 + 7).
static inline int pp_set_pipe_size(int fd, int size) { return fcntl(fd, 1031, size); }
